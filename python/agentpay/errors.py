"""Exceptions that mirror the exit codes of `agentpay pay`: each carries the PayResult."""

from __future__ import annotations

from typing import Optional

from .results import ExitCode, PayResult


class AgentPayError(Exception):
    """A payment that did not end paid and served. `result` says everything that is known."""
    exit_code: ExitCode = ExitCode.ERROR

    def __init__(self, message: str, result: Optional[PayResult] = None):
        super().__init__(message)
        self.result = result


class ClientError(AgentPayError):
    """Exit code 1: could not run (bad setup, the budget file, no price): nothing was reserved or
    paid. Also raised by budget() and reconcile() when they cannot run."""
    exit_code = ExitCode.ERROR


class PaymentRejected(AgentPayError):
    """Exit code 2: refused for good. `result.outcome` is REJECTED when the server refused (a 4xx,
    a payment it will not take) and REFUSED when this client refused before paying (the offer is
    outside the spend controls: `result.reason` names which); then nothing was reserved, signed or
    sent."""
    exit_code = ExitCode.REJECTED


class ResultUnknown(AgentPayError):
    """Exit code 3: whether money moved is not known after the attempts. The reservation stays in
    the budget; `result.evidence` (payer, nonce, transaction) is what reconcile() settles it by.
    Retrying with the same task and step (or key) never pays twice."""
    exit_code = ExitCode.UNKNOWN


class BudgetExceeded(AgentPayError):
    """Exit code 4: the budget cannot cover the price; no payment was signed or sent."""
    exit_code = ExitCode.OVER_BUDGET


_BY_CODE = {e.exit_code: e for e in (ClientError, PaymentRejected, ResultUnknown, BudgetExceeded)}


def raise_for(result: PayResult) -> PayResult:
    """`result` itself when paid (or free); else the exception of its exit code."""
    if result.exit_code == ExitCode.PAID:
        return result
    raise _BY_CODE[result.exit_code](result.message, result)
