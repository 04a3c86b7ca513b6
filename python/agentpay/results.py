"""What the client's calls return: dataclasses over the library's JSON (the same fields
`agentpay pay --json`, `pay budget --json` and `pay reconcile --json` print). Amounts are whole
numbers of the token's atomic units."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import List, Optional, Tuple


class ExitCode(IntEnum):
    """The exit codes of `agentpay pay`; each but PAID has an exception (agentpay.errors)."""
    PAID = 0          # paid (or free) and served
    ERROR = 1         # could not run: nothing was reserved or paid
    REJECTED = 2      # refused for good, by the server or by the spend controls before paying
    UNKNOWN = 3       # whether money moved is not known: kept in the budget for reconcile
    OVER_BUDGET = 4   # the budget cannot cover the price: nothing was signed or sent


class Outcome(str, Enum):
    """How a payment ended, finer than its exit code."""
    PAID = "paid"
    FREE = "free"
    REJECTED = "rejected"
    UNKNOWN = "unknown"
    PAID_NOT_DELIVERED = "paid_not_delivered"
    OVER_BUDGET = "over_budget"
    REFUSED = "refused"
    ERROR = "error"


@dataclass(frozen=True)
class Evidence:
    """What the chain and the server said of a payment whose answer was lost: enough to reconcile."""
    payer: str = ""
    nonce: str = ""
    transaction: str = ""
    authorization_used: Optional[bool] = None


@dataclass(frozen=True)
class PayResult:
    exit_code: ExitCode
    outcome: Outcome
    message: str
    key: str
    amount: int
    reservation_state: str
    http_status: int
    replayed: bool
    attempts: int
    operation_id: str
    reason: str
    body: bytes
    headers: List[Tuple[str, str]]
    evidence: Evidence
    budget_total: int
    budget_committed: int

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    @staticmethod
    def from_json(j: dict) -> "PayResult":
        e = j.get("evidence") or {}
        return PayResult(
            exit_code=ExitCode(j["exit_code"]), outcome=Outcome(j["outcome"]), message=j["message"],
            key=j["key"], amount=int(j["amount"]), reservation_state=j["reservation_state"],
            http_status=j["http_status"], replayed=j["replayed"], attempts=j["attempts"],
            operation_id=j["operation_id"], reason=j["reason"],
            body=base64.b64decode(j.get("body_base64", "")),
            headers=[(h[0], h[1]) for h in j.get("response_headers", [])],
            evidence=Evidence(e.get("payer", ""), e.get("nonce", ""), e.get("transaction", ""),
                              e.get("authorization_used")),
            budget_total=int(j["budget"]["total"]), budget_committed=int(j["budget"]["committed"]))


@dataclass(frozen=True)
class Reservation:
    key: str
    state: str  # reserved, spent, released, unknown
    amount: int
    method: str
    url: str
    scheme: str  # wallet or x402
    x402_version: int
    payer: str
    nonce: str
    asset: str
    pay_to: str
    chain_id: int
    valid_before_s: int
    operation_id: str
    transaction: str
    note: str
    sends: int
    created_ms: int
    updated_ms: int


@dataclass(frozen=True)
class BudgetAsset:
    state: str  # bound, unbound (the next payment binds it), mixed
    network: str = ""
    address: str = ""
    name: str = ""
    decimals: Optional[int] = None


@dataclass(frozen=True)
class BudgetReport:
    asset: BudgetAsset
    total: int
    committed: int  # reserved + spent + unknown
    spent: int
    available: int
    reservations: List[Reservation] = field(default_factory=list)

    @staticmethod
    def from_json(j: dict) -> "BudgetReport":
        a = j["asset"]
        return BudgetReport(
            asset=BudgetAsset(a["state"], a.get("network", ""), a.get("address", ""), a.get("name", ""),
                              a.get("decimals")),
            total=int(j["total"]), committed=int(j["committed"]), spent=int(j["spent"]),
            available=int(j["available"]),
            reservations=[Reservation(**{**r, "amount": int(r["amount"])}) for r in j["reservations"]])


@dataclass(frozen=True)
class ReconcileChange:
    key: str
    from_state: str
    to_state: str
    why: str


@dataclass(frozen=True)
class ReconcileReport:
    changes: List[ReconcileChange]
    kept: List[ReconcileChange]  # looked at and left as they were, with why
    total: int
    committed: int

    @staticmethod
    def from_json(j: dict) -> "ReconcileReport":
        def rows(key: str) -> List[ReconcileChange]:
            return [ReconcileChange(c["key"], c["from"], c["to"], c["why"]) for c in j[key]]
        return ReconcileReport(rows("changes"), rows("kept"), int(j["total"]), int(j["committed"]))
