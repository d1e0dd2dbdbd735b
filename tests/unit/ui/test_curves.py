"""tpu_rl.ui.curves: a run's curves, saves and the watchdog's lines on them; a value of the
wrong shape costs its run its curves, never the answer."""

from __future__ import annotations

import json
from types import SimpleNamespace

from tpu_rl.ui.curves import NAMES, _run_curves, thresholds
from tpu_rl.watch.curves import CHECKPOINTS_KEPT, LOSS


def rules(**values: float) -> SimpleNamespace:
    base = {"spike_factor": 3.0, "spike_floor": 1.5, "kl_factor": 4.0, "kl_floor": 0.2}
    return SimpleNamespace(**(base | {"reward_drop": 0.1} | values))


def test_each_line_is_its_floor_and_none_when_its_rule_is_off():
    assert thresholds(rules()) == {"loss": 1.5, "kl": 0.2, "reward_drop": 0.1}
    off = rules(spike_factor=0.0, kl_factor=0.0, reward_drop=0.0)
    assert thresholds(off) == {"loss": None, "kl": None, "reward_drop": None}


def test_a_run_without_curves_has_every_curve_empty_and_its_thresholds():
    found = _run_curves(None, None)
    assert set(found["curves"]) == set(NAMES) and found["error"] is None
    assert found["saves"] == found["kept"] == [] and set(found["thresholds"]) == {
        "loss",
        "kl",
        "reward_drop",
    }


def test_curves_of_the_wrong_shape_are_named_and_the_thresholds_still_shown():
    found = _run_curves(None, json.dumps({"series": {"loss": "x"}}))
    assert found["error"].startswith("curves: ") and found["thresholds"]


def test_settings_that_cannot_be_read_cost_the_thresholds_only():
    found = _run_curves(json.dumps({"health_spike_factor": "high"}), None)
    assert found["thresholds"] == {} and found["error"].startswith("thresholds: ")


def test_the_newest_saves_are_the_ones_orbax_keeps_and_the_newest_point_is_drawn():
    saves = list(range(5, 65, 5))
    value = {"series": {LOSS: [[1, 2.0]]}, "last": {LOSS: [3, 1.0]}, "saves": saves}
    found = _run_curves(None, json.dumps(value))
    assert found["error"] is None and found["saves"] == saves
    assert found["kept"] == saves[-CHECKPOINTS_KEPT:] and len(found["kept"]) < len(saves)
    assert found["curves"]["loss"] == [[1, 2.0], [3, 1.0]]
