"""The verdict of a failed training pod or backend (tpu_rl.kube.verdicts): capacity lost or a real
failure. Fault shapes are GKE's: a preempted node's pods end Failed, reason Terminated, with a
DisruptionTarget condition; evicted pods; pods whose node is gone; a node with the
impending-node-termination taint. The GRPO client itself is never disrupted: it dies with gRPC
UNAVAILABLE, exit 1, exactly as it does on a real training error."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.kube_wait import DISRUPTED, SHUTDOWN
from tpu_rl.kube import verdicts

TAINT = {"key": verdicts.IMPENDING_TERMINATION_TAINT, "value": "", "effect": "NoSchedule"}


def pod(
    name: str = "w-0", node: str | None = "tpu-0", reason: str | None = None, **status: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": "Failed" if reason else "Running", "reason": reason, **status},
    }


def node(name: str, *taints: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"taints": list(taints)}}


PREEMPTED = pod(reason="Terminated", message=SHUTDOWN, conditions=[DISRUPTED])


@pytest.mark.parametrize(
    ("pods", "nodes", "says"),
    [
        ([PREEMPTED], [node("tpu-0")], "DisruptionTarget TerminationByKubelet"),
        ([pod(conditions=[DISRUPTED])], None, "DisruptionTarget"),  # condition before the end
        ([pod(reason="Evicted", message="The node was low on resource")], [], "Evicted"),
        ([pod(reason="NodeShutdown")], [], "NodeShutdown"),
        ([pod(node="tpu-7")], [node("tpu-0")], "its node tpu-7 no longer exists"),
        ([pod(node="tpu-0")], [node("tpu-0", TAINT)], "impending-node-termination"),
    ],
    ids=["terminated", "disruption_target", "evicted", "node_shutdown", "node_gone", "notice"],
)
def test_capacity_loss_is_read_from_pods_and_nodes(pods, nodes, says):
    nodes = None if nodes is None else [node("cpu-0"), *nodes]
    evidence = verdicts.capacity_evidence([pod("client", node="cpu-0"), *pods], nodes)
    assert evidence is not None and says in evidence, evidence


def test_a_client_exception_without_evidence_is_a_real_failure():
    client = pod("client", node="cpu-0", reason=None)
    client["status"].update(phase="Failed", containerStatuses=[{"state": {"terminated": {}}}])
    other_taint = {"key": "google.com/tpu", "effect": "NoSchedule"}
    nodes = [node("cpu-0"), node("tpu-0", other_taint)]
    assert verdicts.capacity_evidence([client, pod("w-0"), pod("w-1", node=None)], nodes) is None
    # without the right to list nodes, a vanished node cannot be seen: the pods alone decide
    assert verdicts.capacity_evidence([pod(node="tpu-7")], None) is None


def test_verdict_on_pods_for_a_capacity_wait():
    job = {"spec": {"suspend": True}, "status": {}}
    assert verdicts.pods_verdict("Job j", None, [], 1, False)[0][0] == "not_found"
    failure, waiting = verdicts.pods_verdict("Job j", job, [], 1, False)
    assert failure is None and "suspended (not admitted by Kueue)" in waiting
    pending = {"metadata": {"name": "p"}, "status": {"phase": "Pending"}}
    assert verdicts.pods_verdict("Job j", {}, [pending], 1, False) == (None, None)
    failure, waiting = verdicts.pods_verdict("JobSet s", {}, [pending], 1, True)
    assert failure is None and waiting.startswith("0/1 pods running")
    failed = {"metadata": {"name": "p"}, "status": {"phase": "Failed"}}
    assert verdicts.pods_verdict("JobSet s", {}, [failed], 1, True)[0][0] == "failed"
    assert verdicts.pods_verdict("Job j", {}, [failed], 1, False) == (None, None)


def test_a_job_that_completed_before_the_wait_looked_is_not_waited_for():
    """A fast Job may end, and its pods go, before the capacity wait's first look: waiting for
    pods that will never come would fail a successful conversion at the pending timeout."""
    done = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    assert verdicts.pods_verdict("Job j", done, [], 8, False) == (None, None)
