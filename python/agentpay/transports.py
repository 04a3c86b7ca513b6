"""An httpx transport and a requests adapter that pay every 402 by the client library's rules."""

from __future__ import annotations

import itertools
import threading
from typing import Any, Optional

from .client import credentials, options, pay_with, request_fields
from .errors import raise_for
from .results import ExitCode, Outcome, PayResult

# Request headers httpx and requests add that the library sets itself (or that describe the body
# it sends): not passed on.
_OWN_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "accept-encoding",
                "idempotency-key"}


class _Payer:
    """What the transport and the adapter share: the credential and settings, and the steps."""

    def __init__(self, *, task: Optional[str], first_step: int, api_key: Optional[str],
                 api_key_file: Optional[str], buyer_key: Optional[str],
                 buyer_key_file: Optional[str], progress: Any, settings: dict):
        self.task = task
        self.settings = {**options(**settings),
                         **credentials(api_key, api_key_file, buyer_key, buyer_key_file)}
        self.progress = progress
        self._steps = itertools.count(first_step)
        self._lock = threading.Lock()

    def pay(self, method: str, url: str, headers: list, body: bytes, extensions: dict) -> PayResult:
        given = {k.lower(): v for k, v in headers}
        per_request = dict(extensions.get("agentpay") or {})
        settings = dict(self.settings)
        if "idempotency-key" in given:  # the caller's own key for this business action
            settings["idempotency_key"] = given["idempotency-key"]
        elif "step" in per_request or self.task is not None:
            settings["task"] = per_request.get("task", self.task)
            if settings["task"] is not None:
                if "step" in per_request:
                    settings["step"] = int(per_request["step"])
                else:
                    with self._lock:
                        settings["step"] = next(self._steps)
        passed = [(k, v) for k, v in headers if k.lower() not in _OWN_HEADERS]
        result = pay_with(request_fields(url, method, body, passed), settings, self.progress)
        # A server's own refusal is its answer (a 4xx response); everything else that did not end
        # with the server's answer raises (agentpay.errors).
        served = result.exit_code == ExitCode.PAID or (
            result.outcome == Outcome.REJECTED and result.http_status > 0)
        return result if served else raise_for(result)


try:
    import httpx

    class Transport(httpx.BaseTransport):
        """`httpx.Client(transport=agentpay.Transport(budget_db=..., task=..., buyer_key_file=...))`:
        each request is paid by the library (a 402 read, checked against the spend controls and
        the budget, paid once, retried with the same key and signature). The key of each request:
        its own Idempotency-Key header if it has one; else `task` with the next step (counting from
        `first_step`), or the `extensions={"agentpay": {"task": ..., "step": ...}}` of the request;
        else a key good for this request only. Raises agentpay.errors' exceptions for a payment
        refused by the spend controls, over budget, of unknown outcome, or that could not run."""

        def __init__(self, *, task: Optional[str] = None, first_step: int = 0,
                     api_key: Optional[str] = None, api_key_file: Optional[str] = None,
                     buyer_key: Optional[str] = None, buyer_key_file: Optional[str] = None,
                     progress: Any = None, **settings: Any):
            self._payer = _Payer(task=task, first_step=first_step, api_key=api_key,
                                 api_key_file=api_key_file, buyer_key=buyer_key,
                                 buyer_key_file=buyer_key_file, progress=progress, settings=settings)

        def handle_request(self, request: "httpx.Request") -> "httpx.Response":
            body = request.read()
            result = self._payer.pay(request.method, str(request.url), list(request.headers.items()),
                                     body, dict(request.extensions))
            headers = [(k, v) for k, v in result.headers
                       if k.lower() not in ("content-length", "transfer-encoding", "content-encoding")]
            return httpx.Response(result.http_status, headers=headers, content=result.body,
                                  request=request, extensions={"agentpay": result})
except ImportError:  # pragma: no cover - httpx is optional
    pass


try:
    import requests
    import requests.adapters
    import requests.structures

    class RequestsAdapter(requests.adapters.BaseAdapter):
        """`session.mount("https://", agentpay.RequestsAdapter(...))`: as Transport, for requests.
        The key of each request: its Idempotency-Key header, else `task` with the next step."""

        def __init__(self, *, task: Optional[str] = None, first_step: int = 0,
                     api_key: Optional[str] = None, api_key_file: Optional[str] = None,
                     buyer_key: Optional[str] = None, buyer_key_file: Optional[str] = None,
                     progress: Any = None, **settings: Any):
            super().__init__()
            self._payer = _Payer(task=task, first_step=first_step, api_key=api_key,
                                 api_key_file=api_key_file, buyer_key=buyer_key,
                                 buyer_key_file=buyer_key_file, progress=progress, settings=settings)

        def send(self, request: "requests.PreparedRequest", **kwargs: Any) -> "requests.Response":
            body = request.body or b""
            if isinstance(body, str):
                body = body.encode()
            result = self._payer.pay(request.method or "GET", request.url or "",
                                     list(request.headers.items()), body, {})
            response = requests.Response()
            response.status_code = result.http_status
            response.headers = requests.structures.CaseInsensitiveDict(
                [(k, v) for k, v in result.headers
                 if k.lower() not in ("content-length", "transfer-encoding", "content-encoding")])
            response._content = result.body
            response.url = request.url or ""
            response.request = request
            response.reason = ""
            response.agentpay = result  # type: ignore[attr-defined]
            return response

        def close(self) -> None:
            pass
except ImportError:  # pragma: no cover - requests is optional
    pass
