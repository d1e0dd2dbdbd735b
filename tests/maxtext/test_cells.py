"""Every catalogue cell, with one slice and with two (one trainer and one sampler slice):
`validate` and MaxText 0.2.4's own code (config, split, meshes, and an ahead-of-time compile of a
tiny model of the cell's architecture on its trainer's mesh) give the same verdict."""

from __future__ import annotations

import re

import pytest

from tpu_rl.catalogue.cells import CELLS
from tpu_rl.settings.cell_rules import ONE_SLICE

# the session's judge (conftest.judged) runs in the first test: up to about 15 minutes
pytestmark = pytest.mark.timeout(1800)
SHAPES = [(cell, slices) for cell in CELLS for slices in (1, 2)]


def case_of(judged, cell, slices):
    return next(c for c in judged.cells if c.id == f"{cell.model_name}@{cell.tpu_type}x{slices}")


@pytest.mark.parametrize(
    ("cell", "slices"), SHAPES, ids=[f"{c.model_name}@{c.tpu_type}x{n}" for c, n in SHAPES]
)
def test_validate_and_maxtext_judge_the_cell_alike(judged, cell, slices):
    case = case_of(judged, cell, slices)
    accepted = judged.maxtext_accepts(case)
    assert (not case.problems) == accepted, (
        f"validate: {case.problems or 'passes'}; MaxText: "
        f"{'accepts' if accepted else judged.refusal(case)}"
    )
    if accepted:  # the trainer's step compiled for the cell's TPU on its mesh
        assert judged.verdicts[case.id]["compiled"], judged.verdicts[case.id]


@pytest.mark.parametrize("cell", CELLS, ids=[f"{c.model_name}@{c.tpu_type}" for c in CELLS])
def test_two_slices_are_refused_with_maxtexts_own_error_and_the_fix(judged, cell):
    """MaxText 0.2.4 sets num_slices -1 with trainer and sampler slices (configs/types.py:4653):
    the trainer's mesh asserts at max_utils.py:479 with the negative count validate quotes."""
    case = case_of(judged, cell, 2)
    [problem] = case.problems
    assert problem.startswith(
        "num_trainer_slices: 1 with num_samplers_slices 1: MaxText 0.2.4 builds no mesh on "
        "trainer and sampler slices"
    )
    assert problem.endswith(ONE_SLICE)
    verdict = judged.verdicts[case.id]
    where = (verdict["stage"], verdict["where"])
    assert where == ("trainer_mesh", "maxtext/utils/max_utils.py:479"), verdict
    quoted = re.search(r"'(Number of devices per slice -\d+ does not match [^']+)'", problem)
    assert quoted and quoted.group(1) in verdict["error"], (problem, verdict["error"])
