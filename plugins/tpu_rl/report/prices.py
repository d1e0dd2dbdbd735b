"""TPU prices per capacity mode, with where each figure comes from and when it was read.

USD per chip-hour. Only the v6e on-demand list price is a published figure this repository
carries; where the mode's own price is not public (or depends on the customer's contract), the
table says so and uses the on-demand price as an "on-demand equivalent":
- Spot: Spot TPU prices are listed per region on the Cloud TPU pricing page and change; not
  captured here, so the on-demand equivalent (an upper bound: Spot is cheaper).
- flex-start: GKE bills flex-start "using Dynamic Workload Scheduler pricing"
  (https://cloud.google.com/kubernetes-engine/docs/concepts/dws), documented as up to 53%
  below on-demand for TPUs; no per-chip figure for v6e was public to us: on-demand equivalent
  (an upper bound).
- reservation: "You can only use a reservation for TPUs if you have a committed use discount"
  (https://cloud.google.com/tpu/docs/consumption-options): the price is the customer's
  commitment, not public: on-demand equivalent.
"""

from __future__ import annotations

from dataclasses import dataclass

PRICING_PAGE = "https://cloud.google.com/tpu/pricing"
DWS_PAGE = "https://cloud.google.com/kubernetes-engine/docs/concepts/dws"
CONSUMPTION_PAGE = "https://cloud.google.com/tpu/docs/consumption-options"
# The table's date. The v6e on-demand figure is the one the first release carried (the Cloud
# TPU pricing page, us-east5); the copies of that page we could read here list v2-v4 only, so
# check it against the live page before quoting a cost.
TABLE_DATE = "2026-12-02"
LIST_PRICE, ON_DEMAND_EQUIVALENT = "list price", "on-demand equivalent"
ON_DEMAND = "on_demand"


@dataclass(frozen=True)
class Price:
    """The price used for a mode: per chip-hour, its basis (list price or on-demand
    equivalent), the page it comes from and when it was read."""

    usd_per_chip_hour: float
    basis: str
    source: str
    read: str

    def as_dict(self) -> dict[str, object]:
        return {
            "usd_per_chip_hour": self.usd_per_chip_hour,
            "basis": self.basis,
            "source": self.source,
            "read": self.read,
        }


CALENDAR_PAGE = "https://cloud.google.com/tpu/docs/calendar-mode-reservation"


def _v6e(on_demand: float) -> dict[str, Price]:
    return {
        ON_DEMAND: Price(on_demand, LIST_PRICE, PRICING_PAGE, TABLE_DATE),
        "spot": Price(on_demand, ON_DEMAND_EQUIVALENT, PRICING_PAGE, TABLE_DATE),
        "flex_start": Price(on_demand, ON_DEMAND_EQUIVALENT, DWS_PAGE, TABLE_DATE),
        "reservation": Price(on_demand, ON_DEMAND_EQUIVALENT, CONSUMPTION_PAGE, TABLE_DATE),
        "calendar": Price(on_demand, ON_DEMAND_EQUIVALENT, CALENDAR_PAGE, TABLE_DATE),
    }


# USD per chip-hour by TPU generation (prefix of `tpu_type`) and capacity mode.
PRICES: dict[str, dict[str, Price]] = {"v6e": _v6e(2.70)}


def price(tpu_type: str, capacity: str) -> Price | None:
    """The price of a chip-hour of `tpu_type` ('v6e-32') on `capacity`; None when unknown."""
    return PRICES.get(tpu_type.split("-")[0], {}).get(capacity)
