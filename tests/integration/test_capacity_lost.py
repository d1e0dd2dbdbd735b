"""The follower's capacity_lost event against the Kubernetes API emulator: a preempted backend
worker, or a client whose backend node is gone, is capacity lost with the Pre line and the step
reached; a client exception on a healthy backend is a real failure (tpu_rl.kube.verdicts judges,
tests/unit/kube/test_verdicts.py)."""

from __future__ import annotations

import pytest

from tests.support.kube_wait import (
    DISRUPTED,
    JOBSET,
    NS,
    SHUTDOWN,
    C,
    follower,
    make_job,
    make_jobset,
    make_pod,
    pre,
    step,
)

WORKER_LABELS = {"jobset.sigs.k8s.io/jobset-name": JOBSET}


def preempted_backend(cluster, *, node_exists: bool = True) -> None:
    """A client that logged Pre and step 60, a backend worker on node tpu-0 of the slice."""
    make_job(cluster)
    make_pod(cluster, "train-a")
    cluster.append_log(NS, "train-a", C, pre() + step(60))
    make_jobset(cluster)
    make_pod(cluster, f"{JOBSET}-worker-0-0", labels=WORKER_LABELS)
    cluster.patch("pods", NS, f"{JOBSET}-worker-0-0", {"spec": {"nodeName": "tpu-0"}})
    if node_exists:
        cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "tpu-0"}})


@pytest.mark.asyncio
async def test_a_preempted_backend_worker_is_capacity_lost_with_pre_and_step(emu, creds):
    preempted_backend(emu)
    f = follower(emu, backend_jobset_name=JOBSET)
    assert await f.poll() is None
    emu.set_pod_phase(
        NS,
        f"{JOBSET}-worker-0-0",
        "Failed",
        exit_code=143,
        conditions=[DISRUPTED],
        pod_reason="Terminated",
        message=SHUTDOWN,
    )
    event = await f.poll()
    assert event is not None and event["reason"] == "capacity_lost", event
    assert "DisruptionTarget" in event["message"] and "backend pod" in event["message"]
    assert event["pre"]["mean_reward"] == -0.2031 and event["reached_step"] == 60


@pytest.mark.asyncio
async def test_a_client_death_with_its_backend_node_gone_is_capacity_lost(emu, creds):
    preempted_backend(emu, node_exists=False)
    f = follower(emu, backend_jobset_name=JOBSET)
    emu.set_pod_phase(NS, "train-a", "Failed", exit_code=1)
    event = await f.poll()
    assert event is not None and event["reason"] == "capacity_lost", event
    assert "its node tpu-0 no longer exists" in event["message"]


@pytest.mark.asyncio
async def test_a_client_exception_on_a_healthy_backend_is_a_real_failure(emu, creds):
    preempted_backend(emu)
    f = follower(emu, backend_jobset_name=JOBSET)
    emu.append_log(NS, "train-a", C, "jaxlib.xla_extension.XlaRuntimeError: UNAVAILABLE\n")
    emu.set_pod_phase(NS, "train-a", "Failed", exit_code=1)
    event = await f.poll()
    assert event is not None and event["reason"] == "pod_failed", event
