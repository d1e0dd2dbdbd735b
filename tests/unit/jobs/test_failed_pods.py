"""A failed conversion/export Job: its pods' last log lines reach the task log first."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from airflow.providers.cncf.kubernetes.operators.job import KubernetesJobOperator
from airflow.providers.common.compat.sdk import AirflowException, TaskDeferred
from kubernetes.client import ApiClient
from kubernetes.client import models as k8s

from tpu_rl import storage
from tpu_rl.jobs import failed_pods
from tpu_rl.kube import verdicts
from tpu_rl.operators import job_steps

TOKEN = "hf_AbCdEfGhIjKlMnOpQr"


def pod(name: str, phase: str, exit_code: int | None) -> k8s.V1Pod:
    state = k8s.V1ContainerState(
        terminated=k8s.V1ContainerStateTerminated(exit_code=exit_code, reason="Error")
        if exit_code is not None
        else None
    )
    return k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name=name),
        status=k8s.V1PodStatus(
            phase=phase,
            container_statuses=[
                k8s.V1ContainerStatus(
                    name="maxtext",
                    state=state,
                    image="i",
                    image_id="",
                    ready=False,
                    restart_count=0,
                )
            ],
        ),
    )


class FakeCoreV1:
    def __init__(self, pods: list[k8s.V1Pod], logs: dict[str, str]) -> None:
        self.pods, self.logs, self.calls = pods, logs, []

    def list_namespaced_pod(self, namespace: str, label_selector: str) -> Any:
        self.calls.append(("list", namespace, label_selector))
        return SimpleNamespace(items=self.pods)

    def read_namespaced_pod_log(
        self, name: str, namespace: str, container: str, tail_lines: int, _preload_content: bool
    ):
        """As the real client: the raw response (data: bytes) when not preloaded, else the
        repr of the bytes (kubernetes 36's "str" deserialization)."""
        self.calls.append(("log", name, container, tail_lines))
        data = self.logs[name].encode()
        return SimpleNamespace(data=data) if not _preload_content else str(data)


class Recorder:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def _add(self, msg: str, *args: Any) -> None:
        self.lines.append(msg % args)

    info = warning = error = _add


@pytest.fixture
def operator(monkeypatch):
    provider_calls = []

    def provider_execute_complete(self, context, event, **kwargs):
        provider_calls.append(event["status"])
        if event["status"] == "error":
            raise AirflowException(event["message"])  # and then deletes the pods
        return None

    monkeypatch.setattr(KubernetesJobOperator, "execute_complete", provider_execute_complete)
    op = job_steps.ConvertCheckpointOperator(
        task_id="convert", project_id="p", location="l", cluster_name="c"
    )
    op.namespace = "default"
    recorder = Recorder()
    monkeypatch.setattr(type(op), "log", property(lambda self: recorder))
    op.provider_calls = provider_calls
    op.recorder = recorder
    return op


def test_the_failed_pods_last_lines_are_logged_before_the_provider_fails(operator):
    traceback = "\n".join(f"line {i}" for i in range(200))
    core = FakeCoreV1(
        [pod("convert-0", "Failed", 1), pod("convert-1", "Succeeded", 0)],
        {"convert-0": f"hf_access_token={TOKEN}\n{traceback}\nOSError: gemma not found\n"},
    )
    operator.__dict__["client"] = core
    event = {"status": "error", "name": "tpu-rl-convert", "namespace": "default", "message": "m"}
    with pytest.raises(AirflowException, match="m"):
        operator.execute_complete({"ti": None}, event)
    assert operator.provider_calls == ["error"]
    assert ("list", "default", "job-name=tpu-rl-convert") in core.calls
    assert ("log", "convert-0", "maxtext", failed_pods.FAILED_POD_LOG_LINES) in core.calls
    assert not any(c[:2] == ("log", "convert-1") for c in core.calls)  # it did not fail
    (logged,) = operator.recorder.lines
    assert "Pod convert-0 failed (exit code 1, Error)" in logged
    assert logged.endswith("OSError: gemma not found") and TOKEN not in logged
    assert len(logged) <= failed_pods.FAILED_POD_LOG_CHARS + 200


def test_success_reads_no_logs(operator):
    core = FakeCoreV1([pod("convert-0", "Succeeded", 0)], {})
    operator.__dict__["client"] = core
    operator.execute_complete({"ti": None}, {"status": "success", "name": "j"})
    assert core.calls == [] and operator.provider_calls == ["success"]


def test_export_uses_the_newest_committed_step_and_refuses_when_none(monkeypatch, tutorial_conf):
    from tpu_rl.layout import RunLayout
    from tpu_rl.settings.run_settings import load_settings

    layout = RunLayout(load_settings(tutorial_conf), "manual__1", "test-deployment")
    op = job_steps.ExportCheckpointOperator(
        task_id="export", project_id="p", location="l", cluster_name="c"
    )
    pushed = {}
    ti = SimpleNamespace(
        task_id="export",
        xcom_push=lambda key, value: pushed.update({key: value}),
        xcom_pull=lambda task_ids, key=None: pushed.get(key),
    )
    monkeypatch.setattr(storage, "newest_committed_step", lambda uri, conn: (25, [50]))
    manifest = op.prepare(layout, {"ti": ti})
    assert pushed == {"checkpoint_step": 25, "summary": {"checkpoint_step": 25}}
    assert layout.checkpoint_params(25) in " ".join(
        manifest["spec"]["template"]["spec"]["containers"][0]["command"]
    )
    monkeypatch.setattr(storage, "newest_committed_step", lambda uri, conn: (None, [50]))
    with pytest.raises(
        AirflowException, match=r"no committed checkpoint .* \[50\] were never committed"
    ):
        op.prepare(layout, {"ti": ti})


SCHEDULER_SAYS = (
    "0/12 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, "
    "8 node(s) had untolerated taint {google.com/tpu: present}."
)


def pending_pod(name: str, scheduled: bool) -> k8s.V1Pod:
    condition = k8s.V1PodCondition(
        type="PodScheduled",
        status="True" if scheduled else "False",
        reason=None if scheduled else "Unschedulable",
        message=None if scheduled else SCHEDULER_SAYS,
    )
    return k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name=name),
        status=k8s.V1PodStatus(phase="Pending", conditions=[condition]),
    )


def waiting_operator(operator, pods, monkeypatch, queued: bool = False):
    from datetime import timedelta

    core = FakeCoreV1(pods, {})
    operator.__dict__["client"] = core
    labels = {"kueue.x-k8s.io/queue-name": "user-queue"} if queued else {}
    operator.job = k8s.V1Job(
        metadata=k8s.V1ObjectMeta(name="j", namespace="default", labels=labels)
    )
    operator.parallelism = len(pods) or 1
    operator.pending_timeout = timedelta(seconds=60)
    operator.pods_poll_interval = 1.0
    monkeypatch.setattr(type(operator), "cluster_info", property(lambda self: ("https://k", "ca")))
    return lambda: operator.wait_in_triggerer({})


def as_dict(pod: k8s.V1Pod) -> dict:
    return ApiClient().sanitize_for_serialization(pod)


def test_pods_the_scheduler_cannot_place_wait_in_the_triggerer(operator, monkeypatch):
    pods = [pending_pod("convert-0", False), pending_pod("convert-1", True)]
    get = waiting_operator(operator, pods, monkeypatch)
    with pytest.raises(TaskDeferred) as deferred:
        get()
    assert deferred.value.method_name == "execute_complete"  # pods, then the Job: one deferral
    assert deferred.value.trigger.kwargs["pods"]["queued"] is False
    assert deferred.value.trigger.kwargs["job"]["job_name"] == "j"
    # what the trigger decides on these pods: waiting, with the scheduler's reason
    failure, waiting = verdicts.pods_verdict("Job j", {}, [as_dict(p) for p in pods], 2, False)
    assert failure is None and waiting.startswith("1/2 pods scheduled")
    assert "convert-0: Unschedulable: " + SCHEDULER_SAYS in waiting


def test_the_pending_timeout_fails_with_the_schedulers_reason(operator, monkeypatch, tutorial_conf):
    """Without a capacity ladder there is no rung to move to: the wait's reason fails it."""
    from tpu_rl.layout import RunLayout
    from tpu_rl.settings.run_settings import load_settings

    waiting_operator(operator, [pending_pod("convert-0", False)], monkeypatch)
    layout = RunLayout(load_settings(tutorial_conf), "manual__1", "test-deployment")
    monkeypatch.setattr(operator, "run_layout", lambda context: layout)
    message = (
        "Job j: 0/1 pods scheduled after the pending timeout "
        f"(pod convert-0: Unschedulable: {SCHEDULER_SAYS})"
    )
    event = {"status": "error", "reason": "pending_timeout", "message": message, "pods_wait": True}
    with pytest.raises(AirflowException, match="didn't match Pod's node affinity/selector"):
        operator.execute_complete({}, event)
    assert operator.provider_calls == []  # not the provider's Job verdict: no Job ended


def test_scheduled_pods_defer_too_so_the_jobs_end_is_watched(operator, monkeypatch):
    """Pods ready at once still defer to the same trigger: the provider's own deferral would
    sample the Job's end once a poll interval and read every host's pod."""
    pods = [pending_pod("convert-0", True), pending_pod("convert-1", True)]
    with pytest.raises(TaskDeferred) as deferred:
        waiting_operator(operator, pods, monkeypatch)()
    assert type(deferred.value.trigger).__name__ == "PodsThenJobTrigger"
    assert verdicts.pods_verdict("Job j", {}, [as_dict(p) for p in pods], 2, False) == (None, None)


def test_a_queued_job_kueue_can_never_admit_fails_at_once(operator, monkeypatch):
    from airflow.providers.common.compat.sdk import AirflowFailException

    workload = {
        "metadata": {"name": "job-j-1a2b3", "ownerReferences": [{"kind": "Job", "name": "j"}]},
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "False",
                    "reason": "Pending",
                    "message": "couldn't assign flavors to pod set main: resource "
                    "google.com/tpu unavailable in ClusterQueue",
                }
            ]
        },
    }
    get = waiting_operator(operator, [], monkeypatch, queued=True)
    with pytest.raises(TaskDeferred) as deferred:
        get()
    assert deferred.value.trigger.kwargs["pods"]["queued"] is True
    reason, message = verdicts.kueue_refusal("Job j", [workload], "Job", "j")
    event = {"status": "error", "reason": reason, "message": message, "pods_wait": True}
    with pytest.raises(AirflowFailException, match="job-j-1a2b3: couldn't assign flavors"):
        operator.execute_complete({}, event)
