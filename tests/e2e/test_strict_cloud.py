"""Whole DAG runs in the strict sandbox: identity, bucket class, Kueue, scheduling.

Each scenario catches one way a run fails in a strict cloud: a training client without a
storage identity, a backend Kueue cannot admit noticed only after the pending timeout, conversion
pods no node pool can hold, and a second (injected) container in the training pod failing the
wait. The default run's regional bucket,
identities and admission, and a failed conversion's last lines in the task log, are checked on
test_scenarios' success_create and conversion_job_fails (the same runs); an export after a cut
save in test_checkpoints.
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


def backend_refused_at_once(result: RunResult, log: str) -> None:
    assert result.task_states["start_backend"] == "failed", result.task_states
    assert task_seconds(result, "start_backend") < 40  # the pending timeout is 60 s
    kueue_says = "resource cpu unavailable in ClusterQueue" in log
    product_says = "does not cover cpu, memory" in log and "cluster-queue" in log
    assert kueue_says or product_says, "no Kueue coverage message in the task log"


def scheduler_reason_surfaced(result: RunResult, log: str) -> None:
    assert result.task_states["convert"] == "failed", result.task_states
    assert "didn't match Pod's node affinity/selector" in log


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
