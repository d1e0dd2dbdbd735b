"""The capacity ladder's record (tpu_rl.cluster.rung_record): the tries read from
create_cluster's XCom and the rung the run stands on. Its writing through the Task SDK:
tests/unit/test_run_summary.py."""

from __future__ import annotations

from tpu_rl.cluster.rung_record import (
    RECORD_TASK,
    RUNGS_KEY,
    recorded_rung,
    recorded_tries,
    standing_rung,
)
from tpu_rl.settings.rungs import Rung


class TaskInstance:
    """A task instance whose xcom_pull answers one value; the pulls asked."""

    def __init__(self, value: object) -> None:
        self.value, self.pulls = value, []

    def xcom_pull(self, task_ids: str, key: str) -> object:
        self.pulls.append((task_ids, key))
        return self.value


def test_the_tries_are_create_clusters_xcom_and_none_before_any():
    tries = [{"rung": "spot@us-east5-a", "outcome": "ready"}]
    ti = TaskInstance(tries)
    assert recorded_tries(ti) == tries and ti.pulls == [(RECORD_TASK, RUNGS_KEY)]
    assert recorded_tries(TaskInstance(None)) == []
    assert recorded_tries(TaskInstance({"rung": "x"})) == []


def test_the_run_stands_on_the_newest_tries_rung():
    tries = [{"rung": "reservation@us-east5-b"}, {"rung": "spot@us-east5-a"}]
    assert standing_rung(tries) == Rung("spot", "us-east5-a")
    assert recorded_rung(TaskInstance(tries)) == Rung("spot", "us-east5-a")


def test_a_try_that_is_no_rung_is_no_standing():
    assert standing_rung([]) is None and recorded_rung(TaskInstance(None)) is None
    assert standing_rung(["spot@us-east5-a"]) is None
    assert standing_rung([{"rung": 3}]) is None
    assert standing_rung([{"rung": "x"}]) is None  # not a rung
    assert standing_rung([{"rung": "spot@us-east5-a, flex_start@us-east5-b"}]) is None
