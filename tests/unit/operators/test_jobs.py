"""A Job step whose Job has already ended when its wait would start finishes in its try: a
deferral that ends at once can fail the resumed try (apache/airflow#72716)."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.providers.cncf.kubernetes.operators.job import KubernetesJobOperator
from airflow.providers.common.compat.sdk import AirflowException, TaskDeferred
from kubernetes.client import models as k8s

from tpu_rl.jobs.job_trigger import COMPLETION_INDEX
from tpu_rl.operators import jobs
from tpu_rl.operators.job_steps import ConvertCheckpointOperator

JOB = "job-rl-convert"


def job(condition: str | None, reason: str | None = None) -> k8s.V1Job:
    """The Job, with this condition True (None: still running)."""
    status = k8s.V1JobStatus(active=1)
    if condition:
        status.conditions = [k8s.V1JobCondition(type=condition, status="True", reason=reason)]
    return k8s.V1Job(metadata=k8s.V1ObjectMeta(name=JOB, namespace="default"), status=status)


def host_pod(index: int) -> k8s.V1Pod:
    meta = k8s.V1ObjectMeta(name=f"{JOB}-{index}-x", labels={COMPLETION_INDEX: str(index)})
    return k8s.V1Pod(metadata=meta)


class FakeHook:
    """The GKE hook's Job read: the Job in this state at every look."""

    def __init__(self, found: k8s.V1Job) -> None:
        self.found, self.looks = found, 0

    def get_job_status(self, job_name: str, namespace: str) -> k8s.V1Job:
        self.looks += 1
        return self.found


class FakeCore:
    def __init__(self, pods: list[k8s.V1Pod]) -> None:
        self.pods = pods

    def list_namespaced_pod(self, namespace: str, label_selector: str) -> Any:
        assert label_selector == f"job-name={JOB}"
        return SimpleNamespace(items=self.pods)

    def read_namespaced_pod_log(self, **kwargs: Any) -> Any:
        return SimpleNamespace(data=b"OSError: gemma not found\n")


@pytest.fixture
def step(monkeypatch):
    """convert, its Job submitted (no GKE); the provider's execute_complete records events."""
    events: list[dict] = []

    def provider_execute_complete(self, context, event, **kwargs):
        events.append(event)
        if event["status"] == "error":
            raise AirflowException(event["message"])

    monkeypatch.setattr(KubernetesJobOperator, "execute_complete", provider_execute_complete)
    op = ConvertCheckpointOperator(
        task_id="convert", project_id="p", location="l", cluster_name="c"
    )
    request = k8s.V1Job(metadata=k8s.V1ObjectMeta(name=JOB, namespace="default", labels={}))
    monkeypatch.setattr(op, "configure", lambda context: {})
    monkeypatch.setattr(op, "build_job_request_obj", lambda context: request)
    monkeypatch.setattr(op, "create_job", lambda job_request_obj: job_request_obj)
    monkeypatch.setattr(type(op), "cluster_info", property(lambda self: ("https://k", "ca")))
    op.pending_timeout, op.pods_poll_interval = timedelta(seconds=60), 1.0
    op.__dict__["client"] = FakeCore([host_pod(1), host_pod(0)])
    op.events = events
    return op


def context() -> dict:
    pushed: dict[str, Any] = {}
    ti = SimpleNamespace(
        xcom_push=lambda key, value: pushed.update({key: value}),
        xcom_pull=lambda **kwargs: None,  # no conversion lock taken
    )
    return {"ti": ti, "pushed": pushed}


def test_a_job_already_complete_is_finished_without_deferring(step):
    step.__dict__["hook"] = FakeHook(job("Complete"))
    step.execute(context())  # a TaskDeferred here: the wait deferred although met
    (event,) = step.events
    assert event["status"] == "success" and event["name"] == JOB
    assert event["pod_names"] == [f"{JOB}-0-x"]  # host 0's, as the triggerer's wait names it
    assert event["pod_namespace"] == "default" and event["job"]["metadata"]["name"] == JOB


def test_a_job_already_failed_fails_with_its_reason_without_deferring(step):
    step.__dict__["hook"] = FakeHook(job("Failed", "BackoffLimitExceeded"))
    with pytest.raises(AirflowException, match="Job failed with error: BackoffLimitExceeded"):
        step.execute(context())
    assert [e["status"] for e in step.events] == ["error"]


def test_a_job_still_running_after_the_settle_defers(step, monkeypatch):
    monkeypatch.setattr(jobs, "SETTLE_S", 0.05)
    monkeypatch.setattr(jobs, "SETTLE_POLL_S", 0.01)
    hook = step.__dict__["hook"] = FakeHook(job(None))
    with pytest.raises(TaskDeferred) as deferred:
        step.execute(context())
    assert type(deferred.value.trigger).__name__ == "PodsThenJobTrigger"
    assert hook.looks > 1 and step.events == []


def without_defaults(value: Any) -> Any:
    """Drop what the provider adds that the API server treats as unset or defaults anyway."""
    if isinstance(value, dict):
        return {
            k: without_defaults(v)
            for k, v in value.items()
            if v not in ([], {}, None, False) and (k, v) != ("terminationMessagePolicy", "File")
        }
    if isinstance(value, list):
        return [without_defaults(v) for v in value]
    return value


@pytest.mark.parametrize("kind", ["convert", "train", "export"])
def test_the_submitted_job_is_the_runs_manifest_with_airflows_pod_labels(
    kind, tutorial_conf, monkeypatch
):
    """Through the provider's full_job_spec: nothing of the Job's own metadata or deadline is
    copied onto its pods (the Kueue queue label, the run-id annotation, a pod deadline)."""
    from kubernetes.client import ApiClient

    from tpu_rl.jobs import manifests
    from tpu_rl.layout import RunLayout
    from tpu_rl.settings.run_settings import load_settings

    layout = RunLayout(load_settings(tutorial_conf), "manual__1", "test-deployment")
    manifest = {
        "convert": lambda: manifests.conversion_job(layout),
        "train": lambda: manifests.train_job(layout),
        "export": lambda: manifests.export_job(layout, 25),
    }[kind]()
    op = ConvertCheckpointOperator(task_id=kind, project_id="p", location="l", cluster_name="c")
    monkeypatch.setattr(op, "run_layout", lambda context: layout)
    monkeypatch.setattr(op, "prepare", lambda layout, context: manifest)
    op.__dict__["hook"] = SimpleNamespace(get_namespace=lambda: None, is_in_cluster=False)
    op.configure({})
    submitted = ApiClient().sanitize_for_serialization(op.build_job_request_obj(None))
    pods, planned_pods = submitted["spec"].pop("template"), dict(manifest["spec"])["template"]
    assert submitted["metadata"] == manifest["metadata"]
    assert submitted["spec"] == {k: v for k, v in manifest["spec"].items() if k != "template"}
    assert without_defaults(pods["spec"]) == planned_pods["spec"]
    airflow = {"airflow_version", "airflow_kpo_in_cluster"}
    labels = pods["metadata"].pop("labels")
    assert {k: v for k, v in labels.items() if k not in airflow} == planned_pods["metadata"][
        "labels"
    ]
    assert without_defaults(pods["metadata"]) == {
        "name": manifest["metadata"]["name"].removeprefix("job-"),
        "namespace": manifest["metadata"]["namespace"],
    }
