"""tpu_rl.report.run_cost: the run's TPU cost counted from its steps' durations and looks, to
the release of its TPUs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import pytest

from tests.support.run_report import layout
from tpu_rl.names import DAG_ID
from tpu_rl.report import run_cost


def test_durations_from_breadcrumbs_skip_unfinished_and_mapped():
    crumbs = [
        {"task_id": "train", "map_index": -1, "state": "success", "duration": 12.5},
        {"task_id": "export", "map_index": -1, "state": "failed", "duration": None},
        {"task_id": "mapped", "map_index": 0, "state": "success", "duration": 3.0},
    ]
    assert run_cost.step_durations(crumbs, ["train", "export"]) == {"train": 12.5}


def test_the_count_ends_when_cleanup_cluster_released_the_tpus(tutorial_conf):
    """What runs after the TPUs are gone (a person's approval) costs no TPU time: a
    count made an hour after cleanup_cluster's release mark ends at the mark, the same figure
    as a count made at it; without the mark it ends at the count's time."""
    run = layout(tutorial_conf, capacity="spot", reservation="")
    now = datetime.now(UTC)

    def counted(released: float | None) -> dict[str, Any]:
        ti = mock.Mock(dag_id=DAG_ID, run_id=run.run_id)
        ti.xcom_pull.side_effect = lambda task_ids, key="return_value": (
            released if key == run_cost.RELEASED_KEY else [None] * len(task_ids)
        )
        ti.get_task_breadcrumbs.return_value = []
        context = {
            "ti": ti,
            "dag_run": mock.Mock(start_date=now - timedelta(hours=3)),
            "dag": mock.Mock(task_ids=["convert", "export"]),
        }
        return run_cost.count_run_cost(run, context)

    released = counted((now - timedelta(hours=1)).timestamp())
    assert released["pool_seconds"] == pytest.approx(2 * 3600, abs=5)  # not 3 h
    assert "costs no TPU time" in released["rule_text"]
    unmarked = counted(None)
    assert unmarked["pool_seconds"] == pytest.approx(3 * 3600, abs=5)
    assert "may still bill" in unmarked["rule_text"]


def test_steps_the_dag_does_not_name_come_last():
    crumbs = [
        {"task_id": "a_side", "duration": 1.0},
        {"task_id": "train", "duration": 2.0},
        {"task_id": "convert", "duration": 3.0},
    ]
    assert list(run_cost.step_durations(crumbs, ["convert", "train"])) == [
        "convert",
        "train",
        "a_side",
    ]


def test_a_task_instance_with_breadcrumbs_reads_its_runs_durations():
    ti = mock.Mock(dag_id=DAG_ID, run_id="manual__1")
    ti.get_task_breadcrumbs.return_value = [{"task_id": "train", "duration": 4.0}]
    assert run_cost.finished_step_durations(ti, ["train"]) == {"train": 4.0}
    ti.get_task_breadcrumbs.assert_called_once_with(DAG_ID, "manual__1")


@pytest.mark.parametrize(
    ("pushed", "read"), [(1700.5, 1700.5), (12, 12.0), (None, None), ("x", None)]
)
def test_the_release_mark_is_a_time_or_none(pushed, read):
    ti = mock.Mock()
    ti.xcom_pull.return_value = pushed
    assert run_cost.tpus_released_at(ti) == read
    ti.xcom_pull.assert_called_once_with(task_ids=run_cost.RELEASED_TASK, key=run_cost.RELEASED_KEY)


def test_a_run_without_a_start_counts_from_its_first_tasks_start():
    started = datetime(2026, 1, 1, tzinfo=UTC)
    context = {"dag_run": mock.Mock(start_date=None), "ti": mock.Mock(start_date=started)}
    assert run_cost.run_started_at(context) == started.timestamp()


def test_without_durations_a_pool_counted_by_its_steps_says_it_counts_from_the_start(
    tutorial_conf,
):
    run = layout(tutorial_conf, capacity="flex_start", reservation="")
    tpu = run_cost.count_tpu_cost(run, None, 3600.0, [], 10_000.0)
    assert tpu["rule"] == run_cost.TPU_NODES and tpu["pool_seconds"] == 3600.0
    assert tpu["rule_text"].endswith(f"; from the run's start: {run_cost.NO_DURATIONS}")
    with_durations = run_cost.count_tpu_cost(run, {"train": 60.0, "gate": 5.0}, 3600.0, [], 1e4)
    assert with_durations["pool_seconds"] == 60.0
    assert run_cost.NO_DURATIONS not in with_durations["rule_text"]
