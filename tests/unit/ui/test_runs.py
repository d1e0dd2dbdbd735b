"""tpu_rl.ui.runs: a run's row on the RL page from its DB record and summary (the query against
Airflow's DB: tests/ui/test_ui_api.py): its figures, its verdicts, its settings, and a value of
the wrong shape costing its row that value, never the page."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support.heldout import GSM8K, heldout_xcom
from tpu_rl.report.billing import CREATED_POOL, EXISTING_STATIC_POOL, TPU_NODES
from tpu_rl.ui import runs

START = datetime(2026, 3, 1, 8, tzinfo=UTC)
TASKS = (
    "create_cluster",
    "start_backend",
    "convert",
    "export",
    "cleanup_cluster",
    *runs.POOL_ENDERS,
)


def run_record(**fields: Any) -> SimpleNamespace:
    """A DB row of a finished run whose steps all succeeded, an hour apart."""
    record: dict[str, Any] = {
        "run_id": "manual__1",
        "state": "success",
        "run_after": START,
        "start_date": START,
        "end_date": START + timedelta(hours=5),
        "conf": json.dumps({"num_batches": 20}),
        "validate_state": "success",
        "gate_state": "success",
    }
    for task in TASKS:
        record |= {f"{task}_state": None, f"{task}_start": None, f"{task}_end": None}
    return SimpleNamespace(**(record | fields))


COST = {"chip_hours": 4.0, "host_hours": 1.0, "rule": TPU_NODES, "rule_text": "t"}


def test_a_finished_runs_row_has_its_figures_verdict_and_settings():
    summary = {
        "rewards": {"pre": {"mean_reward": 0.1}, "post": {"mean_reward": 0.4, "accuracy": 12.5}},
        "cost": COST,
        "export_uri": "gs://b/m/hf-trained/rl-1/",
    }
    row = runs._row(run_record(), summary)
    assert row["gain"] == pytest.approx(0.3) and row["gate"] == "passed"
    assert (row["post_accuracy"], row["chip_hours"], row["duration_seconds"]) == (12.5, 4.0, 18000)
    assert row["settings"] == {"num_batches": 20} and row["slices"] == "1"
    assert row["run_url"] == "dags/tpu_rl_post_training/runs/manual__1"
    assert row["export_url"].endswith("/storage/browser/b/m/hf-trained/rl-1/")
    assert row["report_url"] == "report/manual__1"  # outcome wrote it: the cost is counted
    assert row["error"] is None


def test_a_run_still_going_has_its_gate_pending_and_a_gain_from_the_gate_first():
    row = runs._row(run_record(end_date=None, gate_state=None), {"gate": {"gain": 0.05}})
    assert row["gate"] == "pending" and row["gain"] == 0.05 and row["chip_hours"] is None


def test_a_conf_of_the_wrong_shape_costs_the_row_its_settings_once():
    row = runs._row(run_record(conf="[1]"), {"cost": COST})
    assert row["error"] == "settings not shown: the run's conf should be an object but is a list"
    assert row["model"] is None and row["settings"] == {}
    uncounted = runs._row(run_record(conf="[1]"), {})
    assert uncounted["error"].startswith(
        "cost not counted: the run's conf should be an object but is a list"
    )
    assert uncounted["error"].count("should be an object") == 1


def hours(n: float) -> datetime:
    return START + timedelta(hours=n)


def test_the_pool_seconds_of_each_rule_from_the_tasks_times():
    run = run_record(
        create_cluster_start=hours(0),
        cleanup_cluster_state="success",
        cleanup_cluster_end=hours(5),
        start_backend_state="success",
        start_backend_start=hours(2),
        wait_for_rewards_state="success",
        wait_for_rewards_end=hours(4),
        convert_state="success",
        convert_start=hours(1),
        convert_end=hours(2),
        export_state="upstream_failed",
    )
    assert runs._task_seconds(run) == {
        CREATED_POOL: 5 * 3600.0,
        EXISTING_STATIC_POOL: 5 * 3600.0,
        TPU_NODES: (2 + 1) * 3600.0,  # the backend's pool two hours, convert one
    }
    assert runs._until(run) == (hours(5).timestamp(), "cleanup_cluster's end")
    assert runs._until(run_record()) == (hours(5).timestamp(), "the run's end")


@pytest.mark.parametrize(
    ("error", "line"),
    [(ValueError("num_batches: bad"), "num_batches: bad"), (KeyError("x"), "KeyError: 'x'")],
)
def test_a_rows_error_is_one_line(error, line):
    assert runs.row_reason(error) == line


def test_slices_say_how_they_split():
    assert runs._slices(SimpleNamespace(cluster_nodepool_count=1, num_trainer_slices=-1)) == "1"
    split = SimpleNamespace(cluster_nodepool_count=4, num_trainer_slices=2, num_samplers_slices=2)
    assert runs._slices(split) == "4 (2 train + 2 sample)"


def test_a_row_shows_the_held_out_evaluation_and_none_without_one():
    """evaluate_heldout's return value (its JSON text as the query reads it) becomes the row's
    `heldout` (tpu_rl.ui.heldout_view); one of the wrong shape costs the row that value only."""
    row = runs._row(run_record(), {}, json.dumps(heldout_xcom(GSM8K)))
    assert row["heldout"]["step"] == 100 and row["error"] is None
    assert row["heldout"]["scores"] == [{"step": 80, "score": 0.7}, {"step": 100, "score": 0.72}]
    assert runs._row(run_record(), {})["heldout"] is None
    bad = runs._row(run_record(), {}, json.dumps({"step": 100}))
    assert bad["heldout"] is None and bad["gate"] == "passed"
    assert bad["error"].startswith("held-out evaluation not shown: the report's alpha should be")
