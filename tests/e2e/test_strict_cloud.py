"""Whole DAG runs in the strict sandbox: identity, bucket class, Kueue, scheduling.

Each scenario catches one way a run fails in a strict cloud: a training client without a
storage identity, a MULTI_REGIONAL bucket in a region, a backend Kueue cannot admit noticed only
after the pending timeout, a failed conversion's pods gone before their logs reach the task log,
an export of the newest step when its save was cut off, and a second (injected) container in
the training pod failing the wait.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import pytest

from sandbox.harness import (
    SETTINGS,
    RunResult,
    Sandbox,
    Workloads,
    write_converted,
)
from tests.support.e2e_runs import reported_run

EXISTING = {"cluster_mode": "existing", "reservation": ""}
FORBIDDEN = "does not have storage.objects.get access to the Google Cloud Storage object"
CONVERSION_LAST_LINE = "size mismatch for model.layers.0.mlp.experts.gate_up_proj"


@dataclass
class Strict:
    name: str
    expected: str
    check: Callable[[RunResult, str], None]
    conf: dict[str, Any] = field(default_factory=dict)
    workloads: Workloads = field(default_factory=Workloads)
    existing_cluster: bool = False
    cluster_vars: dict[str, Any] = field(default_factory=dict)  # how the existing one differs
    converted: bool = False
    # the cluster changes after preflight read it (preflight refuses the fault itself: see
    # tests/e2e/test_preflight.py); what the run's own steps then do
    after_preflight: bool = False


@contextlib.contextmanager
def preflight_saw_it_whole() -> Iterator[None]:
    """Preflight passed: it read the cluster before the fault came."""
    from tpu_rl.operators.preflight import PreflightOperator

    with mock.patch.object(PreflightOperator, "execute", lambda self, context: []):
        yield


def task_seconds(result: RunResult, task_id: str) -> float:
    """How long one task instance ran (start to end), from Airflow's metadata database."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        ti = session.query(TaskInstance).filter_by(run_id=result.run_id, task_id=task_id).one()
        return (ti.end_date - ti.start_date).total_seconds()


def client_refused(result: RunResult, log: str) -> None:
    assert result.task_states["wait_for_rewards"] == "failed", result.task_states
    principal = "subject/ns/default/sa/default"
    assert any(principal in denied[0] for denied in result.gcs.gate.denied), result.gcs.gate.denied
    assert FORBIDDEN in log  # MaxText's error, in the failing task's log


def own_cluster_serves_the_run(result: RunResult, log: str) -> None:
    bucket = result.gcs.bucket_metadata(SETTINGS["gcs_bucket"])
    assert (bucket["location"], bucket["storageClass"]) == ("US-EAST5", "STANDARD")
    assert result.gcs.gate.denied == []  # every pod had the identity it needed
    trained = result.gcs.names(SETTINGS["gcs_bucket"], "gemma4-26b/trained/")
    assert any(name.endswith("/_CHECKPOINT_METADATA") for name in trained), trained
    admitted = [
        e
        for e in result.emu.list("events")
        if e["involvedObject"]["kind"] == "Workload" and e["reason"] == "QuotaReserved"
    ]
    assert any(e["involvedObject"]["name"].startswith("jobset-") for e in admitted), admitted


def backend_refused_at_once(result: RunResult, log: str) -> None:
    assert result.task_states["start_backend"] == "failed", result.task_states
    assert task_seconds(result, "start_backend") < 20  # the pending timeout is 60 s
    kueue_says = "resource cpu unavailable in ClusterQueue" in log
    product_says = "does not cover cpu, memory" in log and "cluster-queue" in log
    assert kueue_says or product_says, "no Kueue coverage message in the task log"


def scheduler_reason_surfaced(result: RunResult, log: str) -> None:
    assert result.task_states["convert"] == "failed", result.task_states
    assert "didn't match Pod's node affinity/selector" in log


def conversion_lines_logged(result: RunResult, log: str) -> None:
    assert result.task_states["convert"] == "failed", result.task_states
    # the pod's lines as lines, not the repr of the log's bytes (b'...\\n...')
    assert any(line.strip().startswith(CONVERSION_LAST_LINE) for line in log.splitlines()), log


def exported_committed_step(result: RunResult, log: str) -> None:
    assert result.xcoms.get("export.checkpoint_step") == 25, result.xcoms  # not the cut step 50


def wait_ignored_the_sidecar(result: RunResult, log: str) -> None:
    assert result.task_states["wait_for_rewards"] == "success", result.task_states


STRICT = [
    Strict(
        "client_without_storage_identity",
        "failed",
        client_refused,
        conf={"client_service_account": "default"},  # an unbound Kubernetes SA
        converted=True,
    ),
    Strict(
        "own_cluster_regional_bucket_identity_and_admission", "success", own_cluster_serves_the_run
    ),
    Strict(
        "cluster_queue_without_cpu_and_memory",
        "failed",
        backend_refused_at_once,
        conf=EXISTING,
        existing_cluster=True,
        cluster_vars={"kueue": "tutorial"},  # the blueprint's Kueue template: google.com/tpu only
        after_preflight=True,
    ),
    Strict(
        "conversion_pods_match_no_node_pool",
        "failed",
        scheduler_reason_surfaced,
        conf=EXISTING,  # the run wants a 4x8 slice; the existing cluster's pool is 8x8
        existing_cluster=True,
        cluster_vars={"tpu_topology": "8x8", "kueue": "tutorial"},
        after_preflight=True,
    ),
    Strict(
        "conversion_fails_with_its_last_lines_in_the_task_log",
        "failed",
        conversion_lines_logged,
        workloads=Workloads(convert_exit_code=1),
    ),
    Strict(
        "export_takes_the_newest_committed_step",
        "success",
        exported_committed_step,
        conf={"checkpoint_period": 25},  # a committed step before the cut last one
        workloads=Workloads(train_cut_last_save=True),
    ),
    Strict(
        "training_pod_with_an_injected_sidecar",
        "success",
        wait_ignored_the_sidecar,
        workloads=Workloads(sidecar=True),
    ),
]


@pytest.mark.parametrize("case", STRICT, ids=[c.name for c in STRICT])
def test_strict_cloud(case: Strict, airflow_db, tmp_path, capfd, e2e_report):
    existing = "gemma4-rl" if case.existing_cluster else None
    with Sandbox(tmp_path).up(existing, existing_cluster_vars=case.cluster_vars) as box:
        if case.converted:
            write_converted(box.gcs, {**SETTINGS, **case.conf})
        with preflight_saw_it_whole() if case.after_preflight else contextlib.nullcontext():
            result, log = reported_run(box, case, {**SETTINGS, **case.conf}, capfd, e2e_report)
        assert result.leftovers == [], result.leftovers
        case.check(result, log)
