"""TPU prices by TPU generation, region and capacity mode: one table, each row with its source
and the date it was read. Update the table (PRICE_ROWS) when a price changes.

USD per chip-hour. What each capacity mode costs a run:
- Spot and flex-start bill the hours their nodes exist, at the mode's price in the run's region.
  Spot prices are per region (Google's billing catalogue, as mirrored by public catalogues);
  flex-start bills "using Dynamic Workload Scheduler pricing", discounted up to 53% below
  on-demand (https://cloud.google.com/kubernetes-engine/docs/concepts/dws): no per-chip v6e
  figure was public to us, so the on-demand price is its upper bound.
- A reservation is paid by its committed use discount, whether or not the pool exists ("You can
  only use a reservation for TPUs if you have a committed use discount",
  https://cloud.google.com/tpu/docs/consumption-options): its cost is the commitment (1- or
  3-year price per committed chip-hour), not a run's spend.
- A calendar-mode reservation bills its whole window (1 to 90 days), used or not
  (https://cloud.google.com/tpu/docs/calendar-mode-reservation).
Where a mode's price in a region is not in the table, the region's on-demand price stands in
as an "upper bound"; without an on-demand price for the region there is no price.
"""

from __future__ import annotations

from dataclasses import dataclass

PRICING_PAGE = "https://cloud.google.com/tpu/pricing"
DWS_PAGE = "https://cloud.google.com/kubernetes-engine/docs/concepts/dws"
CONSUMPTION_PAGE = "https://cloud.google.com/tpu/docs/consumption-options"
CALENDAR_PAGE = "https://cloud.google.com/tpu/docs/calendar-mode-reservation"
BILLING_CATALOGUE = "Cloud Billing catalogue (TPU SKUs), as mirrored by public price catalogues"
LIST_PRICE, UPPER_BOUND = "list price", "upper bound"
# the price modes of the table; a capacity mode bills at one of them (MODE_OF_CAPACITY)
ON_DEMAND, SPOT, FLEX_START, CALENDAR = "on_demand", "spot", "flex_start", "calendar"
COMMIT_1Y, COMMIT_3Y = "commit_1y", "commit_3y"
COMMITMENTS = (COMMIT_1Y, COMMIT_3Y)
PRICE_MODES = (ON_DEMAND, SPOT, FLEX_START, CALENDAR, COMMIT_1Y, COMMIT_3Y)
# What bills: a mode's hours (usage), a commitment (a reservation), a window (calendar).
USAGE, COMMITMENT, WINDOW = "usage", "commitment", "window"
BILLED_AS = {"spot": USAGE, "flex_start": USAGE, "reservation": COMMITMENT, "calendar": WINDOW}
MIN_WINDOW_HOURS = 24.0  # a calendar window lasts 1 to 90 days (CALENDAR_PAGE)
TABLE_DATE = "2026-12-04"  # the newest `read` of the rows

# (generation, region, price mode, USD per chip-hour, source, read). Absent: not known.
PRICE_ROWS: tuple[tuple[str, str, str, float, str, str], ...] = (
    ("v6e", "us-east5", ON_DEMAND, 2.70, f"{PRICING_PAGE} (Trillium GA 2024-12-12)", TABLE_DATE),
    ("v6e", "us-central1", ON_DEMAND, 2.70, f"{PRICING_PAGE} (Trillium GA 2024-12-12)", TABLE_DATE),
    ("v6e", "europe-west4", ON_DEMAND, 2.97, f"{PRICING_PAGE}; {BILLING_CATALOGUE}", TABLE_DATE),
    ("v6e", "us-east5", SPOT, 1.215, BILLING_CATALOGUE, TABLE_DATE),
    ("v6e", "us-central1", SPOT, 0.544, BILLING_CATALOGUE, TABLE_DATE),
    ("v6e", "us-east5", COMMIT_1Y, 1.89, f"{PRICING_PAGE} (1-year commitment)", TABLE_DATE),
    ("v6e", "us-central1", COMMIT_1Y, 1.89, f"{PRICING_PAGE} (1-year commitment)", TABLE_DATE),
    ("v6e", "us-east5", COMMIT_3Y, 1.22, f"{PRICING_PAGE} (3-year commitment)", TABLE_DATE),
    ("v6e", "us-central1", COMMIT_3Y, 1.22, f"{PRICING_PAGE} (3-year commitment)", TABLE_DATE),
)
# Generations the table has no row of, and why (read 2026-12-05). v5p: Google's pricing page
# (PRICING_PAGE) was not readable from here; the figures republished from it disagree (USD 4.20
# per chip-hour in public notes, USD 0.48 per core-hour at
# https://deploybase.ai/articles/google-cloud-tpu-pricing) and name no region, so none is
# taken. TPU7x: no public price ("To get access to TPU7x, contact your account team",
# https://docs.cloud.google.com/tpu/docs/tpu7x).
NO_PUBLIC_PRICE = {
    "v5p": f"no v5p price read from {PRICING_PAGE} (republished figures disagree)",
    "tpu7x": "no public TPU7x price (https://docs.cloud.google.com/tpu/docs/tpu7x: "
    "access through an account team)",
}
# Where a mode's own price is missing, why, and where that is said.
UNKNOWN_WHY = {
    SPOT: ("Spot prices differ by region and change", PRICING_PAGE),
    FLEX_START: ("flex-start is discounted up to 53% below on-demand, no v6e figure", DWS_PAGE),
    CALENDAR: ("no public v6e calendar-mode price", CALENDAR_PAGE),
    COMMIT_1Y: ("no 1-year commitment price for this region", CONSUMPTION_PAGE),
    COMMIT_3Y: ("no 3-year commitment price for this region", CONSUMPTION_PAGE),
}


@dataclass(frozen=True)
class Price:
    """The price of a chip-hour in one region and price mode: its basis (a list price, or the
    on-demand price as an upper bound where the mode's own is not known), its source and the
    date it was read."""

    usd_per_chip_hour: float
    basis: str
    source: str
    read: str
    region: str = ""
    mode: str = ON_DEMAND

    def as_dict(self) -> dict[str, object]:
        return {
            "usd_per_chip_hour": self.usd_per_chip_hour,
            "basis": self.basis,
            "source": self.source,
            "read": self.read,
            "region": self.region,
            "mode": self.mode,
        }


def generation(tpu_type: str) -> str:
    """The TPU generation of a type ('v6e-32' -> 'v6e')."""
    return tpu_type.split("-")[0]


def region_of(zone_or_region: str) -> str:
    """The region of a zone ('us-east5-b' -> 'us-east5'); a region as it is."""
    parts = zone_or_region.split("-")
    return "-".join(parts[:2]) if len(parts) == 3 else zone_or_region


def listed(tpu_type: str, region: str, mode: str) -> Price | None:
    """The table's row for this generation, region and price mode; None when absent."""
    for gen, at, row_mode, usd, source, read in PRICE_ROWS:
        if (gen, at, row_mode) == (generation(tpu_type), region, mode):
            return Price(usd, LIST_PRICE, source, read, region, mode)
    return None


def price_in(tpu_type: str, region: str, mode: str) -> Price | None:
    """The price of a chip-hour of `tpu_type` in `region` (or a zone of it) in price `mode`:
    the table's, else the region's on-demand price as its upper bound; None without either."""
    region = region_of(region)
    if found := listed(tpu_type, region, mode):
        return found
    on_demand = listed(tpu_type, region, ON_DEMAND)
    if on_demand is None:
        return None
    why, page = UNKNOWN_WHY[mode]
    source = f"{on_demand.source}; {why} ({page})"
    return Price(on_demand.usd_per_chip_hour, UPPER_BOUND, source, on_demand.read, region, mode)


def capacity_price(tpu_type: str, region: str, capacity: str) -> Price | None:
    """The price a capacity mode bills at: Spot's, flex-start's, a calendar window's, or a
    reservation's 1-year commitment (its 3-year one: commitment_prices)."""
    mode = COMMIT_1Y if capacity == "reservation" else str(capacity)
    return price_in(tpu_type, region, mode)


def commitment_prices(tpu_type: str, region: str) -> dict[str, Price | None]:
    """The 1- and 3-year commitment prices of a chip-hour in `region`."""
    return {mode: price_in(tpu_type, region, mode) for mode in COMMITMENTS}


def no_price_why(tpu_type: str) -> str | None:
    """Why the table prices no chip-hour of `tpu_type`'s generation; None when it has rows."""
    if regions(tpu_type):
        return None
    return NO_PUBLIC_PRICE.get(generation(tpu_type), f"no {generation(tpu_type)} price known")


def regions(tpu_type: str) -> list[str]:
    """The regions the table prices `tpu_type` in."""
    return sorted({row[1] for row in PRICE_ROWS if row[0] == generation(tpu_type)})
