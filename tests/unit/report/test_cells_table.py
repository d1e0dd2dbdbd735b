"""The README's table of the catalogue's cells (tpu_rl.report.cells_table): current, a row per
cell, the estimate's figures in it."""

from __future__ import annotations

from tests.conftest import REPO
from tpu_rl.catalogue.cells import CELLS
from tpu_rl.report.cells_table import TARGET, cell_row, with_current_blocks


def test_the_readmes_table_is_current():
    text = (REPO / TARGET).read_text()
    assert "<!-- catalogue-table:start" in text
    assert text == with_current_blocks(text), "README.md's cells table is stale: make params"


def test_a_row_per_cell_with_its_time_chip_hours_and_costs():
    text = (REPO / TARGET).read_text()
    for cell in CELLS:
        row = cell_row(cell)
        assert row in text and f"| {cell.tpu_type} ({cell.topology}) |" in row, row
    tutorial = cell_row(CELLS[0]).split(" | ")
    # 32 chips for about 2.4 h; Spot at us-east5's $1.215 a chip-hour; flex-start at most on-demand
    assert tutorial[4:] == ["2.4 h", "77", "commitment", "$94", "at most $194 |"], tutorial
    v5p = next(cell_row(c) for c in CELLS if c.tpu_type == "v5p-64")
    assert v5p.endswith("| 77 | no price | no price | no price |"), v5p
