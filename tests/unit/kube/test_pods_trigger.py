"""The wait in the triggerer until a Job's or JobSet's pods are ready
(tpu_rl.kube.pods_trigger), its look at the cluster replaced by a list of verdicts. Against the
API emulator: tests/integration/test_reward_trigger.py and test_removed_trigger.py."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from tpu_rl.kube.async_client import KubeApiError
from tpu_rl.kube.pods_trigger import PodsReadyTrigger

OPERATOR = SimpleNamespace(
    cluster_info=("https://k", "ca"),
    gcp_conn_id="gcp",
    impersonation_chain=None,
    use_dns_endpoint=False,
)


def waiting(checks: list[Any], deadline: float = 1e12, **kwargs: Any) -> PodsReadyTrigger:
    """The trigger of Job `job-x`'s 2 pods, whose successive checks answer `checks`."""
    made = PodsReadyTrigger.for_operator(
        OPERATOR, ("Job", "ns", "job-x"), "job-name=job-x", 2, deadline=deadline, **kwargs
    )

    async def check() -> tuple[Any, Any]:
        answer = checks.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    made._check = check  # type: ignore[method-assign]
    return made


def test_an_operators_trigger_watches_its_owners_path():
    kwargs = waiting([]).kwargs
    assert kwargs["owner_path"] == "/apis/batch/v1/namespaces/ns/jobs/job-x"
    assert (kwargs["what"], kwargs["cluster_url"], kwargs["expected"]) == (
        "Job job-x",
        "https://k",
        2,
    )
    jobset = PodsReadyTrigger.for_operator(OPERATOR, ("JobSet", "ns", "b"), "s", 9, deadline=0)
    assert jobset.kwargs["owner_path"] == "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets/b"


async def wait(made: PodsReadyTrigger) -> dict[str, Any]:
    return await made._wait(asyncio.Event())


async def test_ready_pods_end_the_wait_through_transient_errors():
    checks = [(None, "1/2 pods scheduled; Pending"), KubeApiError(0, "reset"), (None, None)]
    assert await wait(waiting(checks, poll_interval=0.0)) == {"status": "success"}


async def test_a_failure_ends_the_wait_with_its_reason():
    made = waiting([(("pod_failed", "pod job-x-0 failed"), None)])
    assert await wait(made) == {
        "status": "error",
        "reason": "pod_failed",
        "message": "pod job-x-0 failed",
    }


async def test_a_lasting_api_error_ends_the_wait():
    assert await wait(waiting([KubeApiError(403, "forbidden")])) == {
        "status": "error",
        "message": "Kubernetes API error: HTTP 403: forbidden",
    }


async def test_past_the_deadline_the_wait_names_the_pods_ready_and_why():
    made = waiting([(None, "1/2 pods scheduled; 0/8 nodes are available")], deadline=0.0)
    assert await wait(made) == {
        "status": "error",
        "reason": "pending_timeout",
        "message": "Job job-x: 1/2 pods scheduled after the pending timeout "
        "(0/8 nodes are available)",
    }
    running = waiting([(None, "0/2 pods running; Pending")], deadline=0.0, need_running=True)
    assert (
        "0/2 pods running after the pending timeout (Pending)" in (await wait(running))["message"]
    )
