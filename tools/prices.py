"""`make prices`: refresh the price table's billing-catalogue rows (CATALOGUE_ROWS in
plugins/tpu_rl/prices.py) from the Cloud Billing Catalog API, and say what changed.

The API's services.skus.list of Compute Engine (service 6F81-5844-456A) lists the TPU chip-hour
SKUs: a generation's word in the description (TpuV5p, TpuV6e), "Preemptible" there for Spot
(whose usageType stays OnDemand), Commit1Yr and Commit3Yr for commitments, one price per region
(skypilot-org/skypilot, sky/catalog/data_fetchers/fetch_gcp.py: GCE_SERVICE_ID, get_tpu_df,
_get_unit_price). The rows read now replace those an earlier `make prices` wrote; the rows of
other sources (the mirrored snapshots) stay, so where the API's figure differs from theirs the
price becomes their range. Credentials: the API key in TPU_RL_BILLING_API_KEY, else the
application-default credentials; the host may be redirected with TPU_RL_API_ENDPOINTS
(tpu_rl.deployment.api_endpoint).

Usage: python -m tools.prices [--check] [PRICES_FILE]
"""

from __future__ import annotations

import ast
import os
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tpu_rl import generated_blocks, prices

TARGET = Path("plugins/tpu_rl/prices.py")
COMMAND = "python -m tools.prices"
BILLING_HOST = "cloudbilling.googleapis.com"
COMPUTE_SERVICE = "services/6F81-5844-456A"
API_KEY_ENV = "TPU_RL_BILLING_API_KEY"
SKU_WORDS = {"TpuV5p": "v5p", "TpuV6e": "v6e"}
USAGE_MODES = {
    "OnDemand": prices.ON_DEMAND,
    "Commit1Yr": prices.COMMIT_1Y,
    "Commit3Yr": prices.COMMIT_3Y,
}
# SKUs of one generation that are not its plain chip-hour: fetch_gcp.py's own exclusions, and
# Dynamic Workload Scheduler's (flex-start, calendar) whose price the table does not take
OTHER_SKUS = re.compile(r"reserved|sole tenancy|premium|custom|\bDWS\b|flex|calendar", re.I)
BLOCK = "billing-catalogue"
Row = prices.Row


def catalog_client() -> Any:
    """The Cloud Billing Catalog API's typed client on REST, at the deployment's endpoint."""
    from google.api_core.client_options import ClientOptions
    from google.cloud import billing_v1

    from tpu_rl import deployment

    endpoint = deployment.api_endpoint(BILLING_HOST)
    key = os.environ.get(API_KEY_ENV)
    options = ClientOptions(api_endpoint=endpoint, api_key=key or None)
    return billing_v1.CloudCatalogClient(transport="rest", client_options=options)


def unit_price(sku: Any) -> float | None:
    """The SKU's newest price per hour (its first tier from zero), or None when not hourly."""
    if not sku.pricing_info:
        return None
    expression = sku.pricing_info[-1].pricing_expression
    rates = [r for r in expression.tiered_rates if r.start_usage_amount == 0]
    if expression.usage_unit != "h" or not rates:
        return None
    money = rates[0].unit_price
    return money.units + money.nanos / 1e9


def sku_rows(sku: Any, read: str) -> list[Row]:
    """The table's rows a SKU gives: one per region, or none for a SKU it does not price."""
    words = [gen for word, gen in SKU_WORDS.items() if word in sku.description]
    usd = unit_price(sku)
    if len(words) != 1 or usd is None or OTHER_SKUS.search(sku.description):
        return []
    if "Preemptible" in sku.description:
        mode = prices.SPOT
    elif (mode := USAGE_MODES.get(sku.category.usage_type)) is None:
        return []
    usd = round(usd, 4)
    return [
        (words[0], region, mode, usd, prices.API_SOURCE, read) for region in sku.service_regions
    ]


def api_rows(client: Any, read: str) -> list[Row]:
    """Every TPU chip-hour row the API gives today."""
    found = {}
    for sku in client.list_skus(parent=COMPUTE_SERVICE):
        for row in sku_rows(sku, read):
            found[row[:3]] = row
    return sorted(found.values())


def rows_in(text: str) -> tuple[Row, ...]:
    """The CATALOGUE_ROWS a prices module's text holds."""
    for node in ast.parse(text).body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "CATALOGUE_ROWS":
            return tuple(ast.literal_eval(node.value))
    raise ValueError("no CATALOGUE_ROWS in the prices module")


def merged(old: tuple[Row, ...], fresh: list[Row]) -> list[Row]:
    """The catalogue's rows after a refresh: the other sources' as they were, the API's new."""
    kept = [row for row in old if row[4] != prices.API_SOURCE]
    return sorted([*kept, *fresh], key=lambda r: (r[0], r[1], r[2], r[4]))


def changes(old: tuple[Row, ...], new: list[Row]) -> list[str]:
    """What the refresh changed, a line each: the API's figures added, changed or gone, and
    each price the estimate quotes (the highest of a key's figures) that moved."""

    def by_key(rows: Any, source: str | None = None) -> dict[tuple, float]:
        found: dict[tuple, float] = {}
        for gen, region, mode, usd, key, _ in rows:
            if source is None or key == source:
                found[(gen, region, mode)] = max(usd, found.get((gen, region, mode), usd))
        return found

    lines = []
    before, after = by_key(old, prices.API_SOURCE), by_key(new, prices.API_SOURCE)
    for key in sorted(before.keys() | after.keys()):
        name = " ".join(key)
        if key not in before:
            lines.append(f"added: {name} {after[key]:g} (the API's)")
        elif key not in after:
            lines.append(f"gone from the API: {name} (was {before[key]:g})")
        elif before[key] != after[key]:
            lines.append(f"changed: {name} {before[key]:g} -> {after[key]:g} (the API's)")
    quoted_before, quoted_after = by_key(old), by_key(new)
    for key in sorted(quoted_before.keys() | quoted_after.keys()):
        was, now = quoted_before.get(key), quoted_after.get(key)
        if was != now:
            shown = "none" if was is None else f"{was:g}"
            lines.append(f"quoted price: {' '.join(key)} {shown} -> {now:g}")
    return lines


def block_text(rows: list[Row]) -> str:
    """The CATALOGUE_ROWS assignment, a row a line (ruff's format of it)."""
    lines = ["CATALOGUE_ROWS: tuple[Row, ...] = ("]
    for gen, region, mode, usd, source, read in rows:
        lines.append(f'    ("{gen}", "{region}", "{mode}", {usd!r}, "{source}", "{read}"),')
    return "\n".join([*lines, ")"])


def with_rows(text: str, rows: list[Row]) -> str:
    """The prices module's text with its generated block holding `rows`."""
    block = generated_blocks.Block(BLOCK, lambda marker: f"# {marker}", lambda: block_text(rows))
    return generated_blocks.with_current_blocks(text, (block,), COMMAND)


def refresh(client: Any, target: Path, check: bool, read: str) -> int:
    """Read the API, print what changed, write the table (unless `check`); 1 when `check`
    finds it stale."""
    text = target.read_text()
    old = rows_in(text)
    new = merged(old, api_rows(client, read))
    found = changes(old, new)
    for line in found or ["no price changed"]:
        print(line)
    updated = with_rows(text, new)
    if check:
        return 1 if found else 0
    if updated != text:
        target.write_text(updated)
        print(f"wrote {target} ({len(new)} billing-catalogue rows)")
    return 0


def main(argv: list[str]) -> int:
    args = [a for a in argv if a != "--check"]
    if len(args) > 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    today = datetime.now(UTC).date().isoformat()
    target = Path(args[0]) if args else TARGET
    return refresh(catalog_client(), target, "--check" in argv, today)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
