"""tpu_rl.settings.rungs: the capacity_ladder setting's text read as `mode@zone` rungs."""

from __future__ import annotations

import pytest

from tpu_rl.settings.choices import Capacity
from tpu_rl.settings.rungs import EXAMPLE, LadderError, Rung, parse_ladder


def test_the_example_reads_as_its_rungs_in_order():
    assert parse_ladder(EXAMPLE) == [
        Rung(Capacity.RESERVATION, "us-east5-b"),
        Rung(Capacity.FLEX_START, "us-east5-b"),
        Rung(Capacity.SPOT, "us-east5-a"),
    ]
    assert str(Rung(Capacity.SPOT, "us-east5-a")) == "spot@us-east5-a"


@pytest.mark.parametrize("text", ["", "   "])
def test_an_empty_ladder_has_no_rungs(text):
    assert parse_ladder(text) == []


def test_every_bad_rung_is_named_with_its_place_at_once():
    with pytest.raises(LadderError) as refused:
        parse_ladder("spot@us-east5-a,,cheap@us-east5-b,spot-us-east5-c")
    assert str(refused.value) == (
        "rung 2 '' is not mode@zone (e.g. flex_start@us-east5-a); "
        "rung 3 'cheap@us-east5-b': mode 'cheap' is not one of "
        + ", ".join(c.value for c in Capacity)
        + "; rung 4 'spot-us-east5-c' is not mode@zone (e.g. flex_start@us-east5-a)"
    )
