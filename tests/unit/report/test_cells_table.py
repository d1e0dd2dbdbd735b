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
    # 32 chips for about 2.4 h at the assumed 60 s a step; Spot at us-east5's $1.35 a
    # chip-hour (the snapshots' highest); flex-start at most on-demand
    assert tutorial[4:] == ["60 s", "2.4 h", "77", "commitment", "$104", "at most $194 |"]


def test_every_v5p_cell_has_a_cost_with_its_price_source_and_date():
    """The v5p cells have prices: Spot at us-east5's highest snapshot (1.68) and flex-start at
    most on-demand (4.20), the prices' sources and their date under the table."""
    text = (REPO / TARGET).read_text()
    for cell in (c for c in CELLS if c.tpu_type.startswith("v5p")):
        row = cell_row(cell).split(" | ")
        assert row[-3] == "commitment" and row[-2].startswith("$"), row
        assert row[-1].startswith("at most $"), row
    gpt_oss = next(cell_row(c) for c in CELLS if c.tpu_type == "v5p-64").split(" | ")
    # 32 chips for 2.9 h (50 steps of an assumed 92 s): 92 chip-hours, x 1.68 = $154
    assert gpt_oss[4:] == ["92 s", "2.9 h", "92", "commitment", "$154", "at most $363 |"]
    assert "v5p in us-east5: Spot $1.68 ($1.5601-$1.68: the sources disagree)" in text
    assert "on-demand (flex-start's upper bound) $4.2" in text
    assert "read 2026-12-06" in text and "skypilot-org/skypilot-catalog" in text


def test_each_cell_states_its_step_time_an_assumption_that_differs_by_model_and_slice():
    """Each cell's step is the tutorial's 60 s scaled by its model's parameters per chip-TFLOP
    (not 60 s everywhere, which gives 8B on v5p-8 and 70B on v5p-128 both 2.4 h), stated as
    assumed under the table."""
    steps = {(c.model_name, c.tpu_type): cell_row(c).split(" | ")[4] for c in CELLS}
    assert steps[("llama3.1-8b", "v5p-8")] == "295 s"  # 8 / (4 x 459) vs 26 / (32 x 918)
    assert steps[("llama3.1-70b", "v5p-128")] == "162 s"  # 70 / (64 x 459)
    assert steps[("gemma4-26b", "v6e-32")] == "60 s"
    assert len(set(steps.values())) == len(CELLS)
    assert "Step: assumed: no public step time was found" in (REPO / TARGET).read_text()
