"""The README's table of the catalogue's cells: one row per cell, with `make plan`'s
estimate of the tutorial's run on it (its assumed step time, time, chip-hours and cost per
capacity mode in us-east5), generated from the catalogue (tpu_rl.catalogue.cells), the estimate
(tpu_rl.report.estimate) and the price table (tpu_rl.prices), whose prices it names
with their sources and dates. A test fails when the README's copy is stale.

Usage (at the repository's root): python -m tpu_rl.report.cells_table
"""

from __future__ import annotations

import json
import sys
import textwrap
from functools import cache
from pathlib import Path
from typing import Any

from tpu_rl import generated_blocks, prices
from tpu_rl.catalogue.cells import CELL_SETTINGS, CELLS, TUTORIAL_CELL, Cell
from tpu_rl.generated_blocks import WIDTH, Block, html_comment
from tpu_rl.include_files import include_file
from tpu_rl.report.estimate import STEP_RULE, ModeEstimate, estimate_run, mode_in
from tpu_rl.settings.capacity_modes import COMMITMENT, CapacityMode, capacity_mode
from tpu_rl.settings.choices import Capacity
from tpu_rl.settings.fields import RunSettings
from tpu_rl.settings.run_settings import load_settings

COMMAND = "python -m tpu_rl.report.cells_table"
TARGET = Path("README.md")
# The tutorial's run (its place, capacity and bucket) choosing a cell by model and TPU type: the
# example settings file minus the cell's own settings, which come from the catalogue.
TUTORIAL_CONF = Path("examples") / "tutorial.json"
COLUMNS = ("model", "TPU (topology)", "chips", "follows (date)", "step", "time", "chip-hours")
# The modes the table prices, in its columns' order (a calendar window's price is not public).
CAPACITIES: tuple[CapacityMode, ...] = tuple(
    map(capacity_mode, (Capacity.RESERVATION, Capacity.SPOT, Capacity.FLEX_START))
)
# The mode whose hours the table counts: its pool lives from the cluster's creation to teardown.
COUNTED = capacity_mode(Capacity.SPOT)


def _source(cell: Cell) -> str:
    """The file the cell follows, by name (`run_gptoss_20b_rl.sh`), or `the tutorial`."""
    first = cell.follows.split()[0]
    return first.rsplit("/", 1)[-1].split(":")[0] if "/" in first else "the tutorial"


def _cost(mode: ModeEstimate | None) -> str:
    if mode is None or mode.price is None:
        return "no price"
    if mode.billed_as == COMMITMENT:
        return "commitment"
    bound = "at most " if mode.price.basis == prices.UPPER_BOUND else ""
    return f"{bound}${mode.usd:,.0f}"


@cache
def tutorial_run() -> dict[str, Any]:
    """include/examples/tutorial.json without the settings a catalogue cell gives."""
    conf = json.loads(include_file(TUTORIAL_CONF).read_text())
    return {k: v for k, v in conf.items() if k not in ("model_name", *CELL_SETTINGS)}


def cell_settings(cell: Cell) -> RunSettings:
    """The tutorial's run on this cell."""
    return load_settings(
        {**tutorial_run(), "model_name": cell.model_name, "tpu_type": cell.tpu_type}
    )


def cell_row(cell: Cell) -> str:
    """One cell's row: what it is, what it follows, and the estimate of the tutorial's run."""
    settings = cell_settings(cell)
    estimate = estimate_run(settings)
    region = settings.region
    first = mode_in(estimate, COUNTED.capacity, region)
    name = f"{cell.model_name} (the tutorial's)" if cell is TUTORIAL_CELL else cell.model_name
    cells = [
        name,
        f"{cell.tpu_type} ({cell.topology})",
        str(estimate.chips),
        f"{_source(cell)} ({cell.date})",
        f"{estimate.step_seconds:.0f} s",
        f"{estimate.wall_minutes / 60:.1f} h",
        f"{first.chip_hours:.0f}" if first else "n/a",
        *(_cost(mode_in(estimate, mode.capacity, region)) for mode in CAPACITIES),
    ]
    return f"| {' | '.join(cells)} |"


def price_lines(region: str) -> list[str]:
    """Each priced generation's prices in `region` the table's costs use, with their sources
    and the date they were read; and why a generation has none."""
    lines = []
    for gen in dict.fromkeys(prices.generation(c.tpu_type) for c in CELLS):
        if why := prices.no_price_why(gen):
            lines.append(f"{gen}: no price: {why}.")
            continue
        found = [
            (title, prices.listed(gen, region, mode))
            for title, mode in (
                ("Spot", prices.SPOT),
                ("on-demand (flex-start's upper bound)", prices.ON_DEMAND),
                ("1-year commitment", prices.COMMIT_1Y),
            )
        ]
        shown = "; ".join(
            f"{title} ${p.usd_per_chip_hour:g}"
            + (f" (${p.low:g}-${p.usd_per_chip_hour:g}: the sources disagree)" if p.low else "")
            + f", {p.source}, read {p.read}"
            for title, p in found
            if p is not None
        )
        missing = [title for title, p in found if p is None]
        lines.append(
            f"{gen} in {region}: {shown}"
            + (f"; no public {', '.join(missing)} price." if missing else ".")
        )
    return lines


def table_text() -> str:
    """The README's block: the table, with what its figures assume and the prices it used."""
    header = (*COLUMNS, *(mode.title for mode in CAPACITIES))
    tutorial = cell_settings(TUTORIAL_CELL)
    notes = [
        f"Time and chip-hours: the tutorial's run ({tutorial.region}, its "
        f"{tutorial.num_batches} steps, cluster creation to teardown; Spot's count). Step: "
        f"{STEP_RULE}. Cost per capacity mode from tpu_rl/prices.py: a reservation is "
        "paid by its commitment; flex-start is at most the on-demand price; where sources "
        "disagree the higher price is quoted.",
        *price_lines(tutorial.region),
    ]
    wrapped = [
        textwrap.fill(note, WIDTH, break_long_words=False, break_on_hyphens=False) for note in notes
    ]
    return "\n".join(
        [
            f"| {' | '.join(header)} |",
            f"|{'---|' * len(header)}",
            *map(cell_row, CELLS),
            "",
            "\n\n".join(wrapped),
        ]
    )


BLOCKS = (Block("catalogue-table", html_comment, table_text),)


def with_current_blocks(text: str) -> str:
    """The file's text with the cells' table regenerated between its markers."""
    return generated_blocks.with_current_blocks(text, BLOCKS, COMMAND)


if __name__ == "__main__":
    for target in [Path(arg) for arg in sys.argv[1:]] or [TARGET]:
        target.write_text(with_current_blocks(target.read_text()))
        print(f"wrote the catalogue's table in {target}")
