"""Pure verdicts on the training Job, the Pathways backend and pods waiting to run.

Each takes the objects as the Kubernetes API returns them (JSON dicts) and says whether the
wait failed (reason, message), is still waiting (and why), or may go on. No I/O here.
"""

from __future__ import annotations

from typing import Any

from tpu_rl.kube import kueue_rules
from tpu_rl.kube.objects import condition_text, true_conditions

Failure = tuple[str, str]  # (reason, message)
KUEUE_REFUSED = "kueue_refused"  # the failure reason when Kueue can never admit the Workload
OWNER_FAILED = "failed"  # the Job (or JobSet) or one of its pods failed during the pods wait
FINISHED = ("Succeeded", "Failed")


def phase(pod: dict[str, Any]) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def pod_name(pod: dict[str, Any]) -> str:
    return (pod.get("metadata") or {}).get("name") or ""


def recency(pod: dict[str, Any]) -> tuple[bool, str, str]:
    """Sort key for the newest pod: active before finished, then creation time, then name."""
    meta = pod.get("metadata") or {}
    return phase(pod) not in FINISHED, meta.get("creationTimestamp") or "", meta.get("name") or ""


def current_pod(pods: list[dict[str, Any]], followed_uid: str | None) -> dict[str, Any] | None:
    """The pod being followed, or the newest one when it is gone."""
    for pod in pods:
        if pod["metadata"].get("uid") == followed_uid:
            return pod
    return max(pods, key=recency) if pods else None


def pod_waiting_reason(pod: dict[str, Any]) -> str:
    """Why a pod is not running: PodScheduled=False, a waiting container, or its phase."""
    status = pod.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return condition_text(cond)
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting")
        if waiting:
            return condition_text({"type": "Waiting", **waiting})
    return f"phase {phase(pod)}"


def unscheduled(pod: dict[str, Any]) -> bool:
    """A pending pod the scheduler could not place (PodScheduled False)."""
    return phase(pod) == "Pending" and any(
        c.get("type") == "PodScheduled" and c.get("status") == "False"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def pod_failed(pod: dict[str, Any]) -> bool:
    if phase(pod) == "Failed":
        return True
    if (pod.get("spec") or {}).get("restartPolicy") != "Never":
        return False
    return any(
        ((s.get("state") or {}).get("terminated") or {}).get("exitCode", 0) != 0
        for s in (pod.get("status") or {}).get("containerStatuses") or []
    )


def exit_text(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    for container in status.get("containerStatuses") or []:
        ended = (container.get("state") or {}).get("terminated") or {}
        if ended.get("exitCode"):
            return f"container {container.get('name')} exited with code {ended['exitCode']}" + (
                f" ({ended['reason']})" if ended.get("reason") else ""
            )
    return f"failed: {status.get('reason') or ''} {status.get('message') or ''}".strip()


JOB_SUCCEEDED = ("Complete", "SuccessCriteriaMet")


def job_succeeded(job: dict[str, Any]) -> bool:
    """The Job succeeded: its pods have ended (or are ending) in success.

    Kubernetes adds Complete only once every pod has terminated (from 1.31:
    kubernetes/kubernetes#123775, test/integration/job/job_test.go
    TestSuccessPolicy_GetCompleteConditionAfterAllPodsAreTerminated).
    """
    return any(kind in true_conditions(job) for kind in JOB_SUCCEEDED)


def job_failure(
    job_name: str, job: dict[str, Any], pods: list[dict[str, Any]], pod: dict[str, Any] | None
) -> Failure | None:
    """Why the Job's wait failed: it failed, completed without the result, or its pod failed
    with no retry left."""
    conditions = true_conditions(job)
    if failed := conditions.get("Failed"):
        return "job_failed", f"Job {job_name} failed: {condition_text(failed)}"
    if job_succeeded(job):
        return (
            "completed_without_result",
            f"Job {job_name} completed without a 'Post RL Training' line "
            "(num_test_batches=0, or the log was cut)",
        )
    if pod is None or not pod_failed(pod):
        return None
    backoff_limit = (job.get("spec") or {}).get("backoffLimit", 6)
    failed_pods = sum(1 for p in pods if phase(p) == "Failed")
    failures = max(failed_pods, (job.get("status") or {}).get("failed") or 0)
    if failures <= backoff_limit:
        return None  # the Job controller will start a replacement pod
    return "pod_failed", f"pod {pod_name(pod)} {exit_text(pod)}"


def job_waiting(job_name: str, job: dict[str, Any], pod: dict[str, Any] | None) -> str | None:
    """Why the Job is not running yet (Kueue, no pod, pending pod); None when it runs."""
    if (job.get("spec") or {}).get("suspend"):
        return f"Job {job_name} is suspended (not admitted by Kueue)"
    if pod is None:
        return f"Job {job_name} has no pods yet"
    if phase(pod) == "Pending":
        return f"pod {pod_name(pod)}: {pod_waiting_reason(pod)}"
    return None


def backend_verdict(
    name: str, jobset: dict[str, Any] | None, pods: list[dict[str, Any]], pods_seen: bool
) -> tuple[Failure | None, str | None]:
    """The backend JobSet's (failure, waiting reason); `pods_seen`: it had pods before."""
    if jobset is None:
        return ("backend_failed", f"backend JobSet {name} not found (deleted?)"), None
    conditions = true_conditions(jobset)
    for kind in ("Failed", "Completed"):
        if cond := conditions.get(kind):
            return ("backend_failed", f"backend JobSet {name} {kind}: {condition_text(cond)}"), None
    if not pods and pods_seen:
        return ("backend_failed", f"backend JobSet {name} has lost all its pods"), None
    for pod in pods:
        if phase(pod) == "Failed":
            return ("backend_failed", f"backend pod {pod_name(pod)} {exit_text(pod)}"), None
    return None, set_waiting(f"backend JobSet {name}", jobset, pods, "backend pod")


def set_waiting(
    what: str, owner: dict[str, Any], pods: list[dict[str, Any]], pod_word: str = "pod"
) -> str | None:
    """Why a Job's or JobSet's pods are not all running yet; None when they are."""
    if (owner.get("spec") or {}).get("suspend"):
        return f"{what} is suspended (not admitted by Kueue)"
    if not pods:
        return f"{what} has no pods yet"
    for pod in pods:
        if phase(pod) == "Pending":
            return f"{pod_word} {pod_name(pod)}: {pod_waiting_reason(pod)}"
    return None


def pods_verdict(
    what: str,
    owner: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    expected: int,
    need_running: bool,
) -> tuple[Failure | None, str | None]:
    """For a capacity wait: (failure, waiting reason); both None once enough pods exist and
    none is unschedulable (or run, with `need_running`). The waiting reason names the first
    pending pod and why (the scheduler's PodScheduled message)."""
    if owner is None:
        return ("not_found", f"{what} not found (deleted?)"), None
    conditions = true_conditions(owner)
    if failed := conditions.get("Failed"):
        return (OWNER_FAILED, f"{what} failed: {condition_text(failed)}"), None
    if not need_running and "Complete" in conditions:
        return None, None  # done before the wait looked (its pods may be gone already)
    for pod in pods if need_running else []:  # a Job replaces failed pods itself
        if phase(pod) == "Failed":
            return (OWNER_FAILED, f"{what}: pod {pod_name(pod)} {exit_text(pod)}"), None
    active = [p for p in pods if phase(p) not in FINISHED]
    if need_running:
        ready = [p for p in active if phase(p) == "Running"]
    else:
        ready = [p for p in pods if not unscheduled(p)]
    if len(ready) >= expected and (need_running or len(ready) == len(pods)):
        return None, None
    state = "running" if need_running else "scheduled"
    reason = set_waiting(what, owner, active) or "pods are starting"
    return None, f"{len(ready)}/{expected} pods {state}; {reason}"


def kueue_refusal(
    what: str, workloads: list[dict[str, Any]], kind: str, name: str
) -> Failure | None:
    """A failure when the Workload Kueue made for `kind` `name` can never be admitted."""
    workload = kueue_rules.workload_for(workloads, kind, name)
    if workload and (reason := kueue_rules.never_admitted(workload)):
        workload_name = workload["metadata"].get("name")
        return KUEUE_REFUSED, f"Kueue cannot admit {what}: Workload {workload_name}: {reason}"
    return None


# What GKE shows when capacity goes away (a Spot/flex-start preemption, a node removed or
# shut down, an eviction), as opposed to a training error: a pod's DisruptionTarget
# condition or reason, a pod on a node with the termination notice or on a vanished node.
DISRUPTION_CONDITION = "DisruptionTarget"
DISRUPTED_REASONS = ("Terminated", "Evicted", "NodeShutdown", "Shutdown", "Preempted", "NodeLost")
IMPENDING_TERMINATION_TAINT = "cloud.google.com/impending-node-termination"


def capacity_evidence(
    pods: list[dict[str, Any]], nodes: list[dict[str, Any]] | None = None
) -> str | None:
    """The first sign that these pods lost their capacity, or None.

    `nodes`: the cluster's Nodes, when listed; then a pod on a node that is gone or has the
    impending-termination taint counts too (None: judge the pods alone).
    """
    names = None if nodes is None else {pod_name(n) for n in nodes}
    tainted = {pod_name(n) for n in nodes or [] if _termination_notice(n)}
    for pod in pods:
        status = pod.get("status") or {}
        for cond in status.get("conditions") or []:
            if cond.get("type") == DISRUPTION_CONDITION and cond.get("status") == "True":
                return f"pod {pod_name(pod)}: {DISRUPTION_CONDITION} {condition_text(cond)}"
        if status.get("reason") in DISRUPTED_REASONS:
            return f"pod {pod_name(pod)}: {status['reason']}: {status.get('message') or ''}"
        node = (pod.get("spec") or {}).get("nodeName")
        if node and node in tainted:
            return f"pod {pod_name(pod)}: node {node} has the {IMPENDING_TERMINATION_TAINT} taint"
        if node and names is not None and node not in names:
            return f"pod {pod_name(pod)}: its node {node} no longer exists"
    return None


def _termination_notice(node: dict[str, Any]) -> bool:
    taints = (node.get("spec") or {}).get("taints") or []
    return any(t.get("key") == IMPENDING_TERMINATION_TAINT for t in taints)
