"""Waiting for TPU capacity or Kueue holds no worker slot: the operators defer at once."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException, TaskDeferred
from airflow.sdk.module_loading import import_string

from sandbox.harness import Sandbox
from tests.support.e2e_runs import CLUSTER, context
from tpu_rl.dag.runtime import layout_from_context
from tpu_rl.jobs import manifests
from tpu_rl.kube import objects as kube
from tpu_rl.operators.backend import StartPathwaysBackendOperator
from tpu_rl.operators.job_steps import ConvertCheckpointOperator
from tpu_rl.operators.jobs import SETTLE_POLL_S, SETTLE_S

NS = "default"


@pytest.fixture
def box(tmp_path):
    with Sandbox(tmp_path).up(existing_cluster="gemma4-rl") as sandbox:
        yield sandbox


def deferred(call: Any) -> tuple[TaskDeferred, list[float]]:
    """The TaskDeferred a worker-side call raises, and the sleeps it took on the worker's thread
    (a poll or a retry's back-off: time.sleep, which tenacity's nap.sleep also calls); the
    sandbox's own threads sleep as before."""
    worker, real_sleep, slept = threading.get_ident(), time.sleep, []

    def sleep(seconds: float) -> None:
        if threading.get_ident() == worker:
            slept.append(seconds)
        real_sleep(seconds)

    with pytest.MonkeyPatch.context() as patch, pytest.raises(TaskDeferred) as caught:
        patch.setattr(time, "sleep", sleep)
        call()
    return caught.value, slept


def first_event(deferral: TaskDeferred) -> dict[str, Any]:
    """Run the trigger as the triggerer does: rebuilt from its serialized kwargs."""
    classpath, kwargs = deferral.trigger.serialize()

    async def run() -> dict[str, Any]:
        async for event in import_string(classpath)(**kwargs).run():
            return event.payload
        raise AssertionError("no event")

    return asyncio.run(asyncio.wait_for(run(), 30))


def pod(box: Sandbox, name: str, labels: dict[str, str], phase: str) -> None:
    box.emu.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        }
    )
    box.emu.set_pod_phase(NS, name, phase)


def test_start_backend_defers_until_every_pod_runs(box):
    ctx = context()
    layout = layout_from_context(ctx)
    op = StartPathwaysBackendOperator(task_id="start_backend", **CLUSTER)
    deferral, slept = deferred(lambda: op.execute(ctx))
    assert slept == [] and deferral.method_name == "execute_complete"
    expected = deferral.trigger.serialize()[1]["expected"]
    labels = {kube.JOBSET_NAME_LABEL: layout.backend_jobset}
    for i in range(expected):
        pod(box, f"pw-{i}", labels, "Running")
    assert first_event(deferral) == {"status": "success"}
    assert op.execute_complete(ctx, {"status": "success"}) == layout.backend_jobset
    with pytest.raises(AirflowException, match="TPU capacity or Kueue"):
        op.execute_complete(ctx, {"status": "error", "message": "JobSet x: 0/5 pods running"})


class ConversionJob(ConvertCheckpointOperator):
    """The conversion Job, without the check for an existing checkpoint."""

    def prepare(self, layout, context):
        return manifests.conversion_job(layout)


def convert_operator() -> ConversionJob:
    return ConversionJob(
        task_id="convert",
        deferrable=True,
        wait_until_job_complete=True,
        **CLUSTER,
    )


def test_a_job_whose_pods_do_not_exist_yet_defers_instead_of_sleeping(box):
    ctx = context()
    ctx["ti"].xcom_push = lambda **kwargs: None
    op = convert_operator()
    deferral, slept = deferred(lambda: op.execute(ctx))
    # one deferral for the pods and then the Job's end: the worker runs the task twice in all;
    # its only sleeps are the polls for a Job that ends at once (jobs.SETTLE_S, not a retry)
    assert set(slept) <= {SETTLE_POLL_S} and sum(slept) <= SETTLE_S + SETTLE_POLL_S, slept
    assert deferral.method_name == "execute_complete"
    kwargs = deferral.trigger.serialize()[1]["pods"]
    assert kwargs["owner_path"] == kube.job_path(NS, op.job.metadata.name)
    labels = dict(item.split("=") for item in kwargs["selector"].split(",") if "=" in item)
    labels = {k: v for k, v in labels.items() if not k.endswith("!")}
    for i in range(kwargs["expected"]):  # one per TPU host: they exist, then they succeed
        pod(box, f"convert-{i}", labels, "Pending")
    box.emu.set_job_condition(NS, op.job.metadata.name, "Complete")
    event = first_event(deferral)
    assert (event["status"], event["name"]) == ("success", op.job.metadata.name)
    assert len(box.emu.list("jobs", namespace=NS)) == 1
    with pytest.raises(AirflowException, match="TPU capacity or Kueue admission"):
        op.execute_complete(ctx, {"status": "error", "message": "Job j: 0/1 pods created",
                                  "pods_wait": True})  # fmt: skip
