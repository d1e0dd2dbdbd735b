"""Whole DAG runs in the sandbox, one per fault: the run's state, cleanup, and no token anywhere.

`make e2e REPORT=<file>` runs only these and writes one JSON entry per scenario.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import pytest

from sandbox.harness import (
    HF_TOKEN,
    SETTINGS,
    RunResult,
    Sandbox,
    Workloads,
    write_converted,
)
from sandbox.workloads import EvalResult, crashing_worker_script
from tpu_rl.rewards.trigger import RewardTrigger


@dataclass
class Case:
    name: str
    expected: str
    conf: dict[str, Any] = field(default_factory=dict)
    workloads: Callable[[Sandbox], Workloads] = lambda box: Workloads()
    env: dict[str, str] = field(default_factory=dict)
    existing_cluster: bool = False
    prepare: Callable[[Sandbox], None] | None = None
    check: Callable[[RunResult, str], None] | None = None  # the result and the run's output


def states_are(**expected: str) -> Callable[[RunResult, str], None]:
    def check(result: RunResult, log: str = "") -> None:
        for task_id, state in expected.items():
            assert result.task_states[task_id] == state, (task_id, result.unsuccessful)

    return check


def converted_already(box: Sandbox) -> None:
    write_converted(box.gcs, SETTINGS)


def no_cloud_call(result: RunResult, log: str) -> None:
    assert result.emu.requests == [] and result.calls == [] and result.gke_lookups == 0
    # teardowns whose setups never ran are not started at all
    states_are(validate="failed", cleanup_kubernetes="upstream_failed", outcome="failed")(result)


def api_faults(box: Sandbox) -> Workloads:
    def faults() -> None:
        box.emu.inject_faults(429, 3, retry_after=1)
        box.emu.inject_faults(503, 2)
        box.emu.set_token("sandbox-token-rotated")  # the old token now answers 401

    return Workloads(during_training=faults)


def second_run(box: Sandbox) -> Workloads:
    def trigger() -> None:
        from airflow.api.common.trigger_dag import trigger_dag
        from airflow.utils.types import DagRunTriggeredByType

        trigger_dag(
            "tpu_rl_post_training", conf=dict(SETTINGS), triggered_by=DagRunTriggeredByType.UI
        )

    return Workloads(during_training=trigger)


def second_run_waits(result: RunResult, log: str) -> None:
    """max_active_runs=1: the run triggered meanwhile is queued, and none of its tasks ran."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        queued = session.query(DagRun).filter(DagRun.state == "queued").all()
        assert [r.run_id for r in queued] != [] and queued[0].start_date is None
        started = session.query(TaskInstance).filter(
            TaskInstance.run_id == queued[0].run_id, TaskInstance.state.isnot(None)
        )
        assert started.count() == 0
        for run in queued:
            session.delete(run)


CASES = [
    Case(
        "success_create",
        "success",
        check=lambda r, log: (
            states_are(convert="success", verify="success")(r),
            _gate_numbers(r, 0.0821, 0.1234),
            own_cluster_serves_the_run(r),
            one_cost_for_the_report_the_note_and_the_page(r, log),
        ),
    ),
    Case(
        "success_existing_cluster",
        "success",
        conf={"cluster_mode": "existing", "reservation": ""},
        existing_cluster=True,
        check=lambda r, log: (
            assert_no_gcluster(r),
            _assert(r.clusters["gemma4-rl"]["status"] == "RUNNING", "existing cluster kept"),
        ),
    ),
    Case(
        "conversion_skipped_when_converted",
        "success",
        prepare=converted_already,
        check=states_are(convert="skipped", start_backend="success"),
    ),
    Case(
        "gcluster_deploy_fails_half_way",
        "failed",
        env={"FAKE_GCLUSTER_FAIL": "deploy-halfway"},
        check=states_are(create_cluster="failed", cleanup_cluster="success"),
    ),
    Case(
        "conversion_job_fails",
        "failed",
        workloads=lambda box: Workloads(convert_exit_code=1),
        check=lambda r, log: (
            states_are(convert="failed", cleanup_kubernetes="success", outcome="failed")(r),
            conversion_lines_logged(log),
        ),
    ),
    Case(
        "backend_worker_crashes_during_training",
        "failed",
        workloads=lambda box: Workloads(
            worker_script=crashing_worker_script(after_s=400), train_fail_at_step=10
        ),
        check=states_are(
            wait_for_rewards="failed", stop_backend="upstream_failed", cleanup_kubernetes="success"
        ),
    ),
    Case(
        "training_client_exits_non_zero",
        "failed",
        workloads=lambda box: Workloads(train_exit_code=1, post=None),
        check=states_are(wait_for_rewards="failed", export="upstream_failed"),
    ),
    Case(
        "training_completes_without_post_line",
        "failed",
        workloads=lambda box: Workloads(post=None),
        check=states_are(wait_for_rewards="failed", gate="upstream_failed"),
    ),
    Case(
        "reward_gate_stops_a_regression",
        "failed",
        workloads=lambda box: Workloads(post=EvalResult(corr=5, mean_reward=-0.05)),
        check=states_are(gate="failed", export="upstream_failed", stop_backend="success"),
    ),
    Case(
        "export_fails",
        "failed",
        workloads=lambda box: Workloads(export_exit_code=1),
        check=states_are(export="failed", verify="upstream_failed"),
    ),
    Case(
        "cleanup_destroy_fails_once_then_retries",
        "success",
        env={"FAKE_GCLUSTER_FAIL": "destroy-once"},
        check=lambda r, log: _assert(
            sum(c["argv"][:1] == ["destroy"] for c in r.calls if c["tool"] == "gcluster") == 2,
            "destroy ran twice",
        ),
    ),
    Case("api_429_5xx_and_401_during_the_wait", "success", workloads=api_faults),
    Case(
        "pods_admitted_late",
        "success",
        workloads=lambda box: Workloads(admit_after=3000),  # 50 simulated minutes, 3 s here
    ),
    Case("triggerer_restarted_during_the_wait", "success"),
    Case(
        "bad_setting_makes_no_call",
        "failed",
        # in the form's character class (a capital letter is refused before the run), but not
        # a GKE name: validate refuses it
        conf={"cluster_name": "-not-a-valid-name-", "batch_size": 3},
        check=no_cloud_call,
    ),
    Case(
        "second_run_waits_for_the_first",
        "success",
        workloads=second_run,
        check=second_run_waits,
    ),
]


def _assert(condition: bool, what: str) -> None:
    assert condition, what


def own_cluster_serves_the_run(result: RunResult) -> None:
    """The bucket is regional and standard, every pod had the storage identity it needed,
    the training saved, and Kueue admitted the backend's JobSet."""
    bucket = result.gcs.bucket_metadata(SETTINGS["gcs_bucket"])
    assert (bucket["location"], bucket["storageClass"]) == ("US-EAST5", "STANDARD")
    assert result.gcs.gate.denied == []
    trained = result.gcs.names(SETTINGS["gcs_bucket"], "gemma4-26b/trained/")
    assert any(name.endswith("/_CHECKPOINT_METADATA") for name in trained), trained
    admitted = [
        e
        for e in result.emu.list("events")
        if e["involvedObject"]["kind"] == "Workload" and e["reason"] == "QuotaReserved"
    ]
    assert any(e["involvedObject"]["name"].startswith("jobset-") for e in admitted), admitted


def one_cost_for_the_report_the_note_and_the_page(result: RunResult, log: str) -> None:
    """The run report, the run's note and the RL page show the figure `outcome` counted, in
    chip-hours and host-hours (before, the report counted the TPU nodes to its own time and the
    page to cleanup_cluster's end: two figures for one run)."""
    from airflow.utils.session import create_session

    from tpu_rl.report.run_note import note_text
    from tpu_rl.ui.runs import fetch_runs

    export = result.xcoms["verify.return_value"]
    report = json.loads(result.gcs.read(f"{export}run-report.json"))
    markdown = result.gcs.read(f"{export}run-report.md").decode()
    counted = result.xcoms["outcome.tpu_cost"]
    assert counted["rule"] == "tpu_node_life" and counted["host_hours"] > 0
    assert report["tpu"] == counted  # the report shows outcome's figure, not a count of its own
    with create_session() as session:
        # every run of this worker's DB: a scenario's run with a later run_after may be newer
        row = next(r for r in fetch_runs(session, 10_000) if r["run_id"] == result.run_id)
    for key in ("chip_hours", "host_hours", "estimated_cost_usd"):
        assert row[key] == counted[key], key  # the same figure, not one counted again
    assert counted["chip_hours"] == pytest.approx(4 * counted["host_hours"])  # 4 chips a host
    # a reservation: paid by its commitment, no spend of the run's own
    assert counted["estimated_cost_usd"] is None and counted["billed_as"] == "commitment"
    assert f"{counted['chip_hours']:.2f} chip-hours" in markdown and "commitment" in markdown
    # no API connection in dag.test: outcome logs the note it could not set, with that cost
    note = note_text(
        "succeeded: model exported and verified",
        result.xcoms["wait_for_rewards.return_value"],
        counted,
        f"{export}run-report.md",
    )
    assert "The run's note is not set" in log and note.split("\n\n")[2] in log


def conversion_lines_logged(log: str) -> None:
    """The failed conversion pod's last lines reach the task log as lines, not as the repr of
    the log's bytes (b'...\\n...')."""
    last_line = "size mismatch for model.layers.0.mlp.experts.gate_up_proj"
    assert any(line.strip().startswith(last_line) for line in log.splitlines()), log


def assert_no_gcluster(result: RunResult) -> None:
    assert [c for c in result.calls if c["tool"] == "gcluster"] == []


def _gate_numbers(result: RunResult, pre: float, post: float) -> None:
    gate = result.xcoms["gate.return_value"]
    assert gate["pre_mean_reward"] == pytest.approx(pre) and gate["post_mean_reward"] == post


def token_leaks(result: RunResult, output: str) -> list[str]:
    """Where the Hugging Face token shows up: task logs, XComs, rendered fields, events."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.utils.session import create_session

    with create_session() as session:
        rendered = json.dumps(
            [r.rendered_fields for r in session.query(RenderedTaskInstanceFields)]
        )
    places = {
        "logs": output,
        "xcom": json.dumps(result.xcoms, default=str),
        "rendered_fields": rendered,
        "events": json.dumps(result.emu.list("events")),
    }
    return [where for where, text in places.items() if HF_TOKEN in text]


@contextlib.contextmanager
def triggerer_restart(after_s: float = 1.5) -> Iterator[list[bool]]:
    """The triggerer dies once mid-wait; a new one rebuilds the trigger from its stored kwargs."""
    original = RewardTrigger.run
    restarted: list[bool] = []

    async def run(self: RewardTrigger):  # type: ignore[no-untyped-def]
        if restarted:
            async for event in original(self):
                yield event
            return
        restarted.append(True)
        _, stored_kwargs = self.serialize()  # what Airflow stored when the task deferred
        first = original(self).__aiter__()
        try:
            event = await asyncio.wait_for(first.__anext__(), after_s)
        except TimeoutError:
            await first.aclose()
        else:
            yield event
            return
        async for event in original(RewardTrigger(**stored_kwargs)):
            yield event

    with mock.patch.object(RewardTrigger, "run", run):
        yield restarted


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_scenario(case: Case, airflow_db, tmp_path, capfd, caplog, e2e_report):
    caplog.set_level(logging.INFO, logger="tpu_rl")
    with Sandbox(tmp_path).up(
        existing_cluster="gemma4-rl" if case.existing_cluster else None, env=case.env
    ) as box:
        if case.prepare:
            case.prepare(box)
        restart = (
            triggerer_restart() if "triggerer" in case.name else contextlib.nullcontext([True])
        )
        with restart as restarted:
            result = box.run({**SETTINGS, **case.conf}, case.workloads(box))
        output = capfd.readouterr()
        log = output.out + output.err + caplog.text  # the task logs, and tpu_rl's records
        leaks = token_leaks(result, log)
        entry = {
            "name": case.name,
            "harness": "in-process",
            "dag_run_state": result.state,
            "expected_state": case.expected,
            "cleanup_complete": not result.leftovers and not _clusters_left(case, result),
            "leftover_objects": result.leftovers + _clusters_left(case, result),
            "token_leaks": leaks,
        }
        entry["passed"] = (
            entry["dag_run_state"] == case.expected and entry["cleanup_complete"] and not leaks
        )
        e2e_report.append(entry)
        assert restarted, "the triggerer restart was simulated"
        assert result.state == case.expected, result.why(log)
        assert entry["cleanup_complete"], entry["leftover_objects"]
        assert leaks == []
        if case.check:
            case.check(result, log)


def _clusters_left(case: Case, result: RunResult) -> list[str]:
    """Clusters this run created that still exist (an existing cluster is not the run's)."""
    if case.existing_cluster:
        return []
    return [f"cluster/{name}" for name, c in result.clusters.items() if c.get("status")]
