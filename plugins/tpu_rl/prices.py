"""TPU prices by TPU generation, region and capacity mode: one table, each row with its source
and the date it was read. Google's pricing pages give the v6e rows by hand (PAGE_ROWS); the
billing catalogue gives the rest (CATALOGUE_ROWS), refreshed by `make prices` (tools/prices.py:
the Cloud Billing Catalog API's services.skus.list), which says what changed.

USD per chip-hour. What each capacity mode costs a run:
- Spot and flex-start bill the hours their nodes exist, at the mode's price in the run's region.
  Spot prices are per region and move: each source's figure is a row of its own, dated, and
  where sources disagree the price is their range, the estimate quoting the higher.
  Flex-start bills "using Dynamic Workload Scheduler pricing", discounted up to 53% below
  on-demand (https://cloud.google.com/kubernetes-engine/docs/concepts/dws): no per-chip
  figure was public to us, so the on-demand price is its upper bound.
- A reservation is paid by its committed use discount, whether or not the pool exists ("You can
  only use a reservation for TPUs if you have a committed use discount",
  https://cloud.google.com/tpu/docs/consumption-options): its cost is the commitment (1- or
  3-year price per committed chip-hour), not a run's spend.
- A calendar-mode reservation bills its whole window (1 to 90 days), used or not
  (https://cloud.google.com/tpu/docs/calendar-mode-reservation).
Where a mode's price in a region is not in the table, the region's on-demand price stands in
as an "upper bound"; without an on-demand price for the region there is no price. A run's
negotiated price (the negotiated_usd_per_chip_hour setting: a contract's commitment price, or
TPU7x's, which has no public one) replaces the table's for the run's own capacity mode.
"""

from __future__ import annotations

from dataclasses import dataclass

from tpu_rl.settings.capacity_modes import capacity_mode

PRICING_PAGE = "https://cloud.google.com/tpu/pricing"
DWS_PAGE = "https://cloud.google.com/kubernetes-engine/docs/concepts/dws"
CONSUMPTION_PAGE = "https://cloud.google.com/tpu/docs/consumption-options"
CALENDAR_PAGE = "https://cloud.google.com/tpu/docs/calendar-mode-reservation"
BILLING_CATALOGUE = "Cloud Billing catalogue (TPU SKUs)"
LIST_PRICE, UPPER_BOUND, NEGOTIATED = "list price", "upper bound", "negotiated"
# the price modes of the table; a capacity mode bills at one of them (its price_column:
# tpu_rl.settings.capacity_modes)
ON_DEMAND, SPOT, FLEX_START, CALENDAR = "on_demand", "spot", "flex_start", "calendar"
COMMIT_1Y, COMMIT_3Y = "commit_1y", "commit_3y"
COMMITMENTS = (COMMIT_1Y, COMMIT_3Y)
PRICE_MODES = (ON_DEMAND, SPOT, FLEX_START, CALENDAR, COMMIT_1Y, COMMIT_3Y)
MIN_WINDOW_HOURS = 24.0  # a calendar window lasts 1 to 90 days (CALENDAR_PAGE)
NEGOTIATED_SOURCE = "the run's negotiated_usd_per_chip_hour setting (a contract's price)"

# The sources rows name by key. The mirror: skypilot-org/skypilot-catalog's vms.csv, made by
# sky/catalog/data_fetchers/fetch_gcp.py from the Cloud Billing Catalog API (services.skus.list
# of Compute Engine, service 6F81-5844-456A, whose TpuV5p and TpuV6e SKUs are priced per chip;
# Spot: the SKUs whose description says Preemptible); a slice's price there / its chips is the
# chip's (tpu-v5p-N has N/2 chips, tpu-v6e-N has N). Three snapshots were read, whose Spot
# figures differ; their on-demand figures agree.
MIRROR = f"{BILLING_CATALOGUE}, as mirrored in skypilot-org/skypilot-catalog"
API_SOURCE = "cloud-billing-api"  # the rows `make prices` writes
# key -> (source, the detail naming the one read)
SOURCES = {
    "pricing-page": (f"{PRICING_PAGE} (Trillium GA 2024-12-12)", ""),
    "pricing-page-1y": (f"{PRICING_PAGE} (1-year commitment)", ""),
    "pricing-page-3y": (f"{PRICING_PAGE} (3-year commitment)", ""),
    "mirror-v7@017e250": (MIRROR, "catalogs/v7/gcp/vms.csv at 017e250"),
    "mirror-v8@006059e": (MIRROR, "catalogs/v8/gcp/vms.csv at 006059e"),
    "mirror-v8@8427bbf": (MIRROR, "catalogs/v8/gcp/vms.csv at 8427bbf"),
    API_SOURCE: (f"{BILLING_CATALOGUE}: the Cloud Billing Catalog API", "make prices"),
}

Row = tuple[str, str, str, float, str, str]  # (generation, region, mode, USD, source key, read)
PAGE_ROWS: tuple[Row, ...] = (
    ("v6e", "us-east5", ON_DEMAND, 2.70, "pricing-page", "2026-12-04"),
    ("v6e", "us-central1", ON_DEMAND, 2.70, "pricing-page", "2026-12-04"),
    ("v6e", "us-east5", COMMIT_1Y, 1.89, "pricing-page-1y", "2026-12-04"),
    ("v6e", "us-central1", COMMIT_1Y, 1.89, "pricing-page-1y", "2026-12-04"),
    ("v6e", "us-east5", COMMIT_3Y, 1.22, "pricing-page-3y", "2026-12-04"),
    ("v6e", "us-central1", COMMIT_3Y, 1.22, "pricing-page-3y", "2026-12-04"),
)
# billing-catalogue:start (generated: python -m tools.prices)
CATALOGUE_ROWS: tuple[Row, ...] = (
    ("v5p", "europe-west1", "on_demand", 4.4595, "mirror-v7@017e250", "2026-12-06"),
    ("v5p", "europe-west1", "on_demand", 4.4595, "mirror-v8@006059e", "2026-12-06"),
    ("v5p", "europe-west1", "on_demand", 4.4595, "mirror-v8@8427bbf", "2026-12-06"),
    ("v5p", "europe-west1", "spot", 1.7838, "mirror-v7@017e250", "2026-12-06"),
    ("v5p", "europe-west1", "spot", 1.7838, "mirror-v8@006059e", "2026-12-06"),
    ("v5p", "europe-west1", "spot", 1.7838, "mirror-v8@8427bbf", "2026-12-06"),
    ("v5p", "europe-west4", "on_demand", 4.2525, "mirror-v7@017e250", "2026-12-06"),
    ("v5p", "europe-west4", "on_demand", 4.2525, "mirror-v8@006059e", "2026-12-06"),
    ("v5p", "europe-west4", "on_demand", 4.2525, "mirror-v8@8427bbf", "2026-12-06"),
    ("v5p", "europe-west4", "spot", 1.3485, "mirror-v7@017e250", "2026-12-06"),
    ("v5p", "europe-west4", "spot", 1.3485, "mirror-v8@006059e", "2026-12-06"),
    ("v5p", "europe-west4", "spot", 1.3485, "mirror-v8@8427bbf", "2026-12-06"),
    ("v5p", "us-central1", "on_demand", 4.2, "mirror-v7@017e250", "2026-12-06"),
    ("v5p", "us-central1", "on_demand", 4.2, "mirror-v8@006059e", "2026-12-06"),
    ("v5p", "us-central1", "on_demand", 4.2, "mirror-v8@8427bbf", "2026-12-06"),
    ("v5p", "us-central1", "spot", 1.68, "mirror-v7@017e250", "2026-12-06"),
    ("v5p", "us-central1", "spot", 0.8357, "mirror-v8@006059e", "2026-12-06"),
    ("v5p", "us-central1", "spot", 0.9286, "mirror-v8@8427bbf", "2026-12-06"),
    ("v5p", "us-east1", "on_demand", 4.2, "mirror-v7@017e250", "2026-12-06"),
    ("v5p", "us-east1", "on_demand", 4.2, "mirror-v8@006059e", "2026-12-06"),
    ("v5p", "us-east1", "on_demand", 4.2, "mirror-v8@8427bbf", "2026-12-06"),
    ("v5p", "us-east1", "spot", 1.68, "mirror-v7@017e250", "2026-12-06"),
    ("v5p", "us-east1", "spot", 0.8357, "mirror-v8@006059e", "2026-12-06"),
    ("v5p", "us-east1", "spot", 0.9286, "mirror-v8@8427bbf", "2026-12-06"),
    ("v5p", "us-east5", "on_demand", 4.2, "mirror-v7@017e250", "2026-12-06"),
    ("v5p", "us-east5", "on_demand", 4.2, "mirror-v8@006059e", "2026-12-06"),
    ("v5p", "us-east5", "on_demand", 4.2, "mirror-v8@8427bbf", "2026-12-06"),
    ("v5p", "us-east5", "spot", 1.5601, "mirror-v7@017e250", "2026-12-06"),
    ("v5p", "us-east5", "spot", 1.68, "mirror-v8@006059e", "2026-12-06"),
    ("v5p", "us-east5", "spot", 1.68, "mirror-v8@8427bbf", "2026-12-06"),
    ("v5p", "us-south1", "on_demand", 4.779, "mirror-v7@017e250", "2026-12-06"),
    ("v5p", "us-south1", "on_demand", 4.779, "mirror-v8@006059e", "2026-12-06"),
    ("v5p", "us-south1", "on_demand", 4.779, "mirror-v8@8427bbf", "2026-12-06"),
    ("v5p", "us-south1", "spot", 2.3954, "mirror-v7@017e250", "2026-12-06"),
    ("v5p", "us-south1", "spot", 1.3161, "mirror-v8@006059e", "2026-12-06"),
    ("v5p", "us-south1", "spot", 1.4624, "mirror-v8@8427bbf", "2026-12-06"),
    ("v6e", "europe-west4", "on_demand", 2.97, "mirror-v7@017e250", "2026-12-06"),
    ("v6e", "europe-west4", "on_demand", 2.97, "mirror-v8@006059e", "2026-12-06"),
    ("v6e", "europe-west4", "on_demand", 2.97, "mirror-v8@8427bbf", "2026-12-06"),
    ("v6e", "europe-west4", "spot", 0.7132, "mirror-v7@017e250", "2026-12-06"),
    ("v6e", "europe-west4", "spot", 1.0375, "mirror-v8@006059e", "2026-12-06"),
    ("v6e", "europe-west4", "spot", 1.0375, "mirror-v8@8427bbf", "2026-12-06"),
    ("v6e", "us-central1", "spot", 0.6483, "mirror-v7@017e250", "2026-12-06"),
    ("v6e", "us-central1", "spot", 0.5442, "mirror-v8@006059e", "2026-12-06"),
    ("v6e", "us-central1", "spot", 0.5729, "mirror-v8@8427bbf", "2026-12-06"),
    ("v6e", "us-east5", "spot", 1.08, "mirror-v7@017e250", "2026-12-06"),
    ("v6e", "us-east5", "spot", 1.215, "mirror-v8@006059e", "2026-12-06"),
    ("v6e", "us-east5", "spot", 1.35, "mirror-v8@8427bbf", "2026-12-06"),
)
# billing-catalogue:end
PRICE_ROWS: tuple[Row, ...] = (*PAGE_ROWS, *CATALOGUE_ROWS)
TABLE_DATE = max(row[5] for row in PRICE_ROWS)  # the newest `read` of the rows
# Generations the table has no row of, and why (read 2026-12-06). TPU7x: no public price ("To
# get access to TPU7x, contact your account team", https://docs.cloud.google.com/tpu/docs/tpu7x),
# none in the billing catalogue's mirror either; a contract's price goes in the run's
# negotiated_usd_per_chip_hour.
NO_PUBLIC_PRICE = {
    "tpu7x": "no public TPU7x price (https://docs.cloud.google.com/tpu/docs/tpu7x: access "
    "through an account team); set negotiated_usd_per_chip_hour to your contract's",
}
# Where a mode's own price is missing, why, and where that is said.
UNKNOWN_WHY = {
    SPOT: ("Spot prices differ by region and change", PRICING_PAGE),
    FLEX_START: (
        "flex-start is discounted up to 53% below on-demand, no per-chip figure",
        DWS_PAGE,
    ),
    CALENDAR: ("no public calendar-mode price", CALENDAR_PAGE),
    COMMIT_1Y: ("no public 1-year commitment price for this region", CONSUMPTION_PAGE),
    COMMIT_3Y: ("no public 3-year commitment price for this region", CONSUMPTION_PAGE),
}


@dataclass(frozen=True)
class Price:
    """The price of a chip-hour in one region and price mode: its basis (a list price, the
    on-demand price as an upper bound where the mode's own is not known, or the run's
    negotiated one), its source and the date it was read; `low` the lowest figure where the
    sources disagree (the price is then the highest)."""

    usd_per_chip_hour: float
    basis: str
    source: str
    read: str
    region: str = ""
    mode: str = ON_DEMAND
    low: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "usd_per_chip_hour": self.usd_per_chip_hour,
            "basis": self.basis,
            "source": self.source,
            "read": self.read,
            "region": self.region,
            "mode": self.mode,
            "low": self.low,
        }

    @property
    def range_text(self) -> str:
        """`; sources disagree: 1.08-1.35, the higher quoted` where they do, else ''."""
        if self.low is None:
            return ""
        return f"; sources disagree: {self.low:g}-{self.usd_per_chip_hour:g}, the higher quoted"


def generation(tpu_type: str) -> str:
    """The TPU generation of a type ('v6e-32' -> 'v6e')."""
    return tpu_type.split("-")[0]


def region_of(zone_or_region: str) -> str:
    """The region of a zone ('us-east5-b' -> 'us-east5'); a region as it is."""
    parts = zone_or_region.split("-")
    return "-".join(parts[:2]) if len(parts) == 3 else zone_or_region


def listed(tpu_type: str, region: str, mode: str) -> Price | None:
    """The table's price for this generation, region and price mode: the highest of its rows'
    figures, each source named (with its figure where they disagree); None when it has none."""
    rows = [r for r in PRICE_ROWS if r[:3] == (generation(tpu_type), region, mode)]
    if not rows:
        return None
    figures = {usd for _, _, _, usd, _, _ in rows}
    details: dict[str, list[str]] = {}
    for _, _, _, usd, key, _ in rows:
        source, detail = SOURCES[key]
        shown = f"{detail} {usd:g}" if len(figures) > 1 else detail
        details.setdefault(source, []).append(shown.strip())
    text = "; ".join(
        f"{source} ({', '.join(filter(None, found))})" if any(found) else source
        for source, found in details.items()
    )
    low = min(figures) if len(figures) > 1 else None
    read = max(r[5] for r in rows)
    return Price(max(figures), LIST_PRICE, text, read, region, mode, low)


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


def price_mode(capacity: str) -> str:
    """The price mode a capacity mode bills at: a reservation's is its 1-year commitment."""
    return capacity_mode(capacity).price_column


def capacity_price(
    tpu_type: str, region: str, capacity: str, negotiated_usd: float = 0.0
) -> Price | None:
    """The price a capacity mode bills at: Spot's, flex-start's, a calendar window's, or a
    reservation's 1-year commitment (its 3-year one: commitment_prices); `negotiated_usd`
    (above 0) instead of the table's."""
    mode = price_mode(capacity)
    if negotiated_usd > 0:  # a setting's, read at no date
        return Price(negotiated_usd, NEGOTIATED, NEGOTIATED_SOURCE, "", region_of(region), mode)
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
