"""pay(), budget(), reconcile() and derive_key(): the C++ client library's calls, one
implementation of its rules (the price read from the 402 before anything is signed, the budget
file shared by every process, the key derived from the task and step, the same signature on every
retry, 202 polling, reconciliation against the chain)."""

from __future__ import annotations

import base64
import os
from typing import Callable, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native
from .errors import ClientError, raise_for
from .results import BudgetReport, PayResult, ReconcileReport

DEFAULT_BUDGET_DB = "agentpay-budget.db"
DEFAULT_MAX_AMOUNT = 1_000_000

Headers = Union[Mapping[str, str], Iterable[Tuple[str, str]]]
Progress = Callable[[str], None]


def _read_secret(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


def credentials(api_key: Optional[str] = None, api_key_file: Optional[str] = None,
                buyer_key: Optional[str] = None, buyer_key_file: Optional[str] = None) -> dict:
    """The one way to pay, as the library's options: a wallet API key or an x402 buyer key (0x +
    64 hex digits), given or read from a file."""
    given = [x for x in (api_key, api_key_file, buyer_key, buyer_key_file) if x]
    if len(given) != 1:
        raise ClientError("give exactly one of api_key, api_key_file, buyer_key, buyer_key_file")
    if api_key or api_key_file:
        return {"api_key": api_key or _read_secret(api_key_file or "")}
    return {"buyer_key": buyer_key or _read_secret(buyer_key_file or "")}


def options(*, budget_db: str = DEFAULT_BUDGET_DB, budget: Optional[int] = None,
            task: Optional[str] = None, step: Optional[int] = None,
            idempotency_key: Optional[str] = None, max_attempts: int = 5, timeout_ms: int = 60000,
            attempt_timeout_ms: int = 15000, x402_version: int = 0, assets: Sequence[str] = (),
            networks: Sequence[str] = (), payees: Sequence[str] = (),
            max_amount: int = DEFAULT_MAX_AMOUNT, chain_rpc: Optional[str] = None,
            ca_file: Optional[str] = None) -> dict:
    """Everything of a payment but the request and the credential, as the library's options."""
    o: dict = {"budget_db": os.fspath(budget_db), "max_attempts": max_attempts, "timeout_ms": timeout_ms,
               "attempt_timeout_ms": attempt_timeout_ms, "x402_version": x402_version,
               "assets": list(assets), "networks": list(networks), "payees": list(payees),
               "max_amount": max_amount}
    for name, value in (("budget", budget), ("task", task), ("step", step),
                        ("idempotency_key", idempotency_key), ("chain_rpc", chain_rpc),
                        ("ca_file", ca_file)):
        if value is not None:
            o[name] = value
    return o


def pay_with(request: dict, settings: dict, progress: Optional[Progress] = None) -> PayResult:
    """One payment from the library's own options (request fields + settings + credential)."""
    return PayResult.from_json(_native.pay({**settings, **request}, progress))


def request_fields(url: str, method: str = "GET", body: Optional[bytes] = None,
                   headers: Optional[Headers] = None) -> dict:
    pairs: List[Tuple[str, str]] = list(headers.items()) if isinstance(headers, Mapping) else list(headers or ())
    fields = {"url": url, "method": method.upper(), "headers": [[k, v] for k, v in pairs]}
    if body:
        fields["body_base64"] = base64.b64encode(body).decode()
    return fields


def pay(url: str, *, method: str = "GET", body: Optional[Union[bytes, str]] = None,
        headers: Optional[Headers] = None, api_key: Optional[str] = None,
        api_key_file: Optional[str] = None, buyer_key: Optional[str] = None,
        buyer_key_file: Optional[str] = None, progress: Optional[Progress] = None,
        check: bool = True, **settings) -> PayResult:
    """Pays for one request, as `agentpay pay` does, and returns what happened.

    `settings` are options()'s keywords (budget_db, budget, task, step, max_amount, ...). With
    `check` (the default) a result other than paid or free raises the exception of its exit code
    (agentpay.errors); without, the result is returned whatever it is."""
    data = body.encode() if isinstance(body, str) else body
    result = pay_with(request_fields(url, method, data, headers),
                      {**options(**settings),
                       **credentials(api_key, api_key_file, buyer_key, buyer_key_file)}, progress)
    return raise_for(result) if check else result


def budget(budget_db: str = DEFAULT_BUDGET_DB) -> BudgetReport:
    """The budget file's total, what is committed and every reservation (`agentpay pay budget`)."""
    j = _native.budget(os.fspath(budget_db))
    if "error" in j:
        raise ClientError(j["error"])
    return BudgetReport.from_json(j)


def reconcile(budget_db: str = DEFAULT_BUDGET_DB, *, chain_rpc: Optional[str] = None,
              api_key: Optional[str] = None, ca_file: Optional[str] = None,
              expiry_buffer_seconds: int = 30, timeout_ms: int = 10000,
              progress: Optional[Progress] = None) -> ReconcileReport:
    """Settles the reservations whose outcome is unknown (`agentpay pay reconcile`): an x402 one is
    released only once its authorization has expired and the chain says it was never used."""
    o: dict = {"budget_db": os.fspath(budget_db), "expiry_buffer_seconds": expiry_buffer_seconds,
               "timeout_ms": timeout_ms}
    for name, value in (("chain_rpc", chain_rpc), ("api_key", api_key), ("ca_file", ca_file)):
        if value is not None:
            o[name] = value
    j = _native.reconcile(o, progress)
    if "error" in j:
        raise ClientError(j["error"])
    return ReconcileReport.from_json(j)


def derive_key(credential: str, task: str, step: int) -> str:
    """The idempotency key of `step` of `task` for the payer holding `credential` (the same as
    `agentpay pay --task --step` derives)."""
    return _native.derive_key(credential, task, step)
