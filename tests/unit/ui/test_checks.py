"""tpu_rl.ui.checks: the RL page's checks of a run's summary."""

from __future__ import annotations

import json

import pytest

from tests.support.heldout import GSM8K, heldout_xcom, without_champion
from tpu_rl.run_summary import FIELDS, PER_TASK
from tpu_rl.ui.checks import (
    CHECKS,
    Malformed,
    anomaly,
    attempts,
    checkpoint_step,
    conf,
    curves,
    export_uri,
    gate,
    heldout_report,
    looks,
    parsed,
    rewards,
    rungs,
    tpu_cost,
    training_progress,
)


def test_the_page_checks_every_field_of_the_summary():
    assert set(CHECKS) == {*FIELDS, *PER_TASK}


def test_a_json_column_is_decoded_as_airflow_decodes_an_xcom():
    assert parsed(None) is None
    assert parsed('{"step": 3}') == {"step": 3}
    assert parsed(json.dumps(json.dumps([1, 2]))) == [1, 2]  # a JSON text inside: loaded again
    with pytest.raises(Malformed, match="unparseable JSON"):
        parsed("{not json")


@pytest.mark.parametrize(
    ("check", "value", "says"),
    [
        (rewards, [], "the value should be an object but is a list"),
        (rewards, {"pre": {"accuracy": "high"}}, "pre's accuracy should be a number but is a text"),
        (
            rewards,
            {"intermediate": [{"step": 2.5}]},
            "evaluation 1's step should be an integer but is a number",
        ),
        (attempts, [{"started": "2026-01-01T00:00:00"}], "attempt 1's started should be a time"),
        (rungs, [{"rung": "spot@us-east5-a", "outcome": 3}], "rung 1's outcome should be a text"),
        (gate, {"checkpoint": {"step": True}}, "the gate's checkpoint's step should be an integer"),
        (export_uri, "/tmp/export", "the value should be a gs:// URI but is a text"),
        (checkpoint_step, False, "the value should be an integer but is a boolean"),
        (looks, [{"at": 1, "nodes": {"n": None}}], "node n's creation should be a number but is n"),
        (tpu_cost, {"host_hours": 1.0}, "the cost's chip_hours should be a number but is null"),
        (training_progress, {"total_steps": 5}, "the progress's step should be a number but is n"),
        (curves, {"series": {"loss": [[1, 2, 3]]}}, "a point of loss should be [step, value]"),
        (anomaly, {"step": 3}, "the anomaly's rule should be a text but is null"),
        # the page's line reads why, step and anomaly_step: one missing is this row's problem
        (anomaly, {"rule": "x", "step": 3, "anomaly_step": 3}, "the anomaly's why should be"),
        (anomaly, {"rule": "x", "why": "y", "step": 3}, "the anomaly's anomaly_step should be a"),
        (conf, "x", "the run's conf should be an object but is a text"),
        (heldout_report, [], "the report should be an object but is a list"),
        (heldout_report, {**heldout_xcom(), "step": "100"}, "the report's step should be an inte"),
        (heldout_report, heldout_xcom(alpha=1), "the report's alpha should be between 0 and 1 b"),
        (heldout_report, heldout_xcom(step_scores={"best": 0.7}), "the report's scored step 'b"),
        (heldout_report, heldout_xcom({**GSM8K, "items": None}), "benchmark 1's items should be"),
        # counts a verdict cannot be rebuilt from (none, or not four)
        (heldout_report, heldout_xcom({**GSM8K, "vs_base": [0, 0, 0, 0]}), "benchmark 1's vs_ba"),
        (heldout_report, heldout_xcom({**GSM8K, "vs_champion": [1, 2]}), "benchmark 1's vs_cham"),
    ],
)
def test_a_value_of_the_wrong_shape_is_refused_saying_what_is_wrong(check, value, says):
    with pytest.raises(Malformed) as refused:
        check(value)
    assert str(refused.value).startswith(says)


def test_values_of_the_right_shape_are_returned_as_given():
    found = {
        "pre": {"accuracy": 1.0},
        "post": None,
        "intermediate": [{"step": 5, "mean_reward": 0.5}],
        "attempts": [{"started": "2026-01-01T00:00:00+00:00", "ended": None, "tpu_hosts": 8}],
    }
    assert rewards(found) is found
    assert curves({"series": {"loss": [[1, 0.5]]}, "last": {"kl": [2, 0.1]}, "saves": [25]})
    assert conf(None) == {} and checkpoint_step(None) is None
    report = heldout_xcom(GSM8K, without_champion(GSM8K))
    assert heldout_report(report) is report and heldout_report(None) is None
