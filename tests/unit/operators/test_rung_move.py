"""A move to another rung of the capacity ladder holds through a retry of the task that moved the
run: the rung the run stands on is the ladder's one record (tpu_rl.cluster.rung_record), not the
moving task's own XComs, which Airflow clears when that task runs again."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import XCom

from tests.conftest import REPO
from tests.xcom_run import Run, Task
from tpu_rl import deployment
from tpu_rl.cluster import climb, session
from tpu_rl.cluster.rung_record import recorded_tries
from tpu_rl.dag.runtime import layout_from_context
from tpu_rl.names import Step
from tpu_rl.operators.cluster import CreateClusterOperator
from tpu_rl.operators.rung_move import deploy_rungs_after, record_rung_left
from tpu_rl.run_record import run_record

RUN_ID = "manual__ladder"
LADDER = "spot@us-east5-b, flex_start@us-east5-a"
LOG = logging.getLogger("test")


@pytest.fixture
def run(monkeypatch) -> Run:
    """A run whose `validate` recorded its settings (a two-rung ladder), with gcluster's deploys
    standing on every rung."""
    the_run = Run(RUN_ID)
    monkeypatch.setattr(XCom, "set", the_run.set)
    monkeypatch.setattr(deployment, "check_gcp_connection", lambda: "google_cloud_default")
    monkeypatch.setattr(session, "toolkit_bundle", lambda settings: None)

    @contextlib.contextmanager
    def toolkit_session(*args: Any) -> Iterator[Any]:
        yield lambda on, commands: None  # the rung's deploy stands

    monkeypatch.setattr(session, "toolkit_session", toolkit_session)
    the_run.xcoms[(Step.VALIDATE, "return_value")] = run_record(params(), "test-deployment")
    return the_run


def params() -> dict[str, Any]:
    conf = json.loads((REPO / "include" / "examples" / "capacity-ladder.json").read_text())
    return {**conf, "capacity": "spot", "reservation": "", "capacity_ladder": LADDER}


def context(ti: Task) -> dict[str, Any]:
    return {"params": params(), "run_id": RUN_ID, "ti": ti}


def rung_of(ti: Task) -> str:
    s = layout_from_context(context(ti)).settings
    return f"{s.capacity}@{s.zone}"


def test_a_retry_of_the_task_that_moved_the_run_stands_on_the_new_rung(run):
    deploy = run.start(Step.CREATE_CLUSTER)
    settings = layout_from_context(context(deploy)).settings
    CreateClusterOperator(task_id=Step.CREATE_CLUSTER).apply(
        context(deploy), settings, lambda on: None
    )
    backend = run.start(Step.START_BACKEND)
    assert rung_of(backend) == "spot@us-east5-b"
    on_first = layout_from_context(context(backend)).settings
    record_rung_left(context(backend), on_first, climb.NO_SLICE, "GCE out of resources", LOG)
    deploy_rungs_after(context(backend), on_first, LOG)
    assert rung_of(backend) == "flex_start@us-east5-a"

    retry = run.start(Step.START_BACKEND)  # e.g. the backend failed once on the new rung
    assert rung_of(retry) == "flex_start@us-east5-a"  # not back on the rung it left
    assert rung_of(run.start(Step.WAIT_FOR_REWARDS)) == "flex_start@us-east5-a"
    tries = recorded_tries(run.start(Step.OUTCOME))  # what the run report shows
    assert [(t["rung"], t["outcome"]) for t in tries] == [
        ("spot@us-east5-b", "no_slice"),
        ("flex_start@us-east5-a", "ready"),
    ], tries
