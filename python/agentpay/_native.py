"""The binding: libagentpay_client.so (the C++ client library's C ABI, include/agentpay/client_c.h)
loaded with ctypes. Every call takes and returns JSON text; nothing here decides anything about a
payment. ctypes releases the GIL for the duration of each call, so threads pay concurrently."""

from __future__ import annotations

import ctypes
import json
import os
import threading
from typing import Any, Callable, Optional

_LIB_NAME = "libagentpay_client.so"
_PROGRESS = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_char), ctypes.c_uint64, ctypes.c_void_p)

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None


def library_path() -> str:
    """Where the library is: $AGENTPAY_CLIENT_LIB, else beside this file (inside the wheel)."""
    return os.environ.get("AGENTPAY_CLIENT_LIB") or os.path.join(os.path.dirname(__file__), _LIB_NAME)


def _load() -> ctypes.CDLL:
    global _lib
    with _lock:
        if _lib is None:
            lib = ctypes.CDLL(library_path())
            for name, args in (("agentpay_pay", [ctypes.c_char_p, _PROGRESS, ctypes.c_void_p]),
                               ("agentpay_budget", [ctypes.c_char_p]),
                               ("agentpay_reconcile", [ctypes.c_char_p, _PROGRESS, ctypes.c_void_p]),
                               ("agentpay_derive_key", [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint64])):
                fn = getattr(lib, name)
                fn.argtypes = args
                fn.restype = ctypes.c_void_p  # freed by agentpay_free, so not c_char_p
            lib.agentpay_free.argtypes = [ctypes.c_void_p]
            lib.agentpay_free.restype = None
            lib.agentpay_version.argtypes = []
            lib.agentpay_version.restype = ctypes.c_char_p
            _lib = lib
        return _lib


def _take(pointer: Optional[int]) -> str:
    lib = _load()
    if not pointer:
        raise MemoryError("libagentpay_client returned nothing")
    try:
        return ctypes.string_at(pointer).decode("utf-8")
    finally:
        lib.agentpay_free(pointer)


def _progress(callback: Optional[Callable[[str], None]]) -> Any:
    if callback is None:
        return _PROGRESS()  # NULL

    def call(line: Any, size: int, _context: Any) -> None:
        try:
            callback(ctypes.string_at(line, size).decode("utf-8", "replace"))
        except Exception:  # a callback's error must not cross into C
            pass
    return _PROGRESS(call)


def pay(options: dict, progress: Optional[Callable[[str], None]] = None) -> dict:
    callback = _progress(progress)  # kept alive for the call
    return json.loads(_take(_load().agentpay_pay(json.dumps(options).encode(), callback, None)))


def budget(budget_db: str) -> dict:
    return json.loads(_take(_load().agentpay_budget(os.fsencode(budget_db))))


def reconcile(options: dict, progress: Optional[Callable[[str], None]] = None) -> dict:
    callback = _progress(progress)
    return json.loads(_take(_load().agentpay_reconcile(json.dumps(options).encode(), callback, None)))


def derive_key(credential: str, task: str, step: int) -> str:
    return _take(_load().agentpay_derive_key(credential.encode(), task.encode(), step))


def version() -> str:
    return _load().agentpay_version().decode()
