"""AgentPay for Python: pay for HTTP APIs (x402 or an AgentPay wallet) with the guarantees of the
C++ agent client it binds: the price read before anything is signed, a budget file shared by every
process, one idempotency key per business action (derived from the task and step), the same signed
payment on every retry, and reconciliation that releases money only once the chain says an
authorization was never used. See docs/python.md."""

from .client import DEFAULT_BUDGET_DB, budget, derive_key, pay, reconcile
from .errors import (AgentPayError, BudgetExceeded, ClientError, PaymentRejected, ResultUnknown)
from .results import (BudgetAsset, BudgetReport, Evidence, ExitCode, Outcome, PayResult,
                      ReconcileChange, ReconcileReport, Reservation)
from ._native import version

__all__ = ["pay", "budget", "reconcile", "derive_key", "version", "DEFAULT_BUDGET_DB",
           "AgentPayError", "ClientError", "PaymentRejected", "ResultUnknown", "BudgetExceeded",
           "PayResult", "Evidence", "ExitCode", "Outcome", "BudgetReport", "BudgetAsset",
           "Reservation", "ReconcileReport", "ReconcileChange", "Transport", "RequestsAdapter"]

try:
    from .transports import Transport  # noqa: F401  (needs httpx)
except ImportError:  # pragma: no cover
    pass
try:
    from .transports import RequestsAdapter  # noqa: F401  (needs requests)
except ImportError:  # pragma: no cover
    pass
