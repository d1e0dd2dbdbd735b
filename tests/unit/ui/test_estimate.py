"""tpu_rl.ui.estimate: the estimate page's answer for the settings a body holds: every problem,
the warnings of valid settings, and the table unless a setting it comes from is invalid."""

from __future__ import annotations

import json

import pytest

from tpu_rl.ui.estimate import MAX_DEPTH, NOT_AN_OBJECT, settings_estimate


def nested(levels: int) -> object:
    value: object = 1
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("{not json", "not valid JSON ("),
        ("[1, 2]", NOT_AN_OBJECT),
        ("[" * 5000 + "]" * 5000, "not valid "),
        (json.dumps({"extra_train_args": nested(MAX_DEPTH + 1)}), "extra_train_args: nested more"),
    ],
)
def test_a_body_whose_settings_cannot_be_read_gets_its_problem_and_no_estimate(text, error):
    answer = settings_estimate(text)
    [problem] = answer["errors"]
    assert problem.startswith(error), problem
    assert answer["estimate"] is None and answer["warnings"] == [] and answer["withheld_by"] == []


def test_valid_settings_get_the_table(tutorial_conf):
    answer = settings_estimate(json.dumps(tutorial_conf))
    assert answer["errors"] == [] and answer["withheld_by"] == []
    table = answer["estimate"]
    assert set(table) == {"columns", "summary", "rows", "note"}
    assert table["summary"].startswith("1 x v6e-32, 32 chips in all; 50 steps; us-east5")


def test_an_invalid_figure_setting_withholds_the_table_and_is_named(tutorial_conf):
    answer = settings_estimate(json.dumps({**tutorial_conf, "num_batches": -3}))
    assert answer["estimate"] is None and answer["withheld_by"] == ["num_batches"]
    assert any(e.startswith("num_batches:") for e in answer["errors"]) and not answer["warnings"]


def test_an_invalid_setting_no_figure_reads_keeps_the_table(tutorial_conf):
    answer = settings_estimate(json.dumps({**tutorial_conf, "cluster_name": "Bad_Name"}))
    assert answer["estimate"] is not None and answer["withheld_by"] == []
    assert any(e.startswith("cluster_name:") for e in answer["errors"])
