"""Kubernetes access shared by the operators and triggers (tpu_rl.kube.objects): API paths,
status conditions, and the calls that tolerate 409 and 404."""

from __future__ import annotations

import pytest
from kubernetes.client.rest import ApiException

from tpu_rl.kube import objects


def test_the_api_paths_quote_their_names():
    assert objects.pods_path("ns") == "/api/v1/namespaces/ns/pods"
    assert objects.pod_log_path("ns", "a/b") == "/api/v1/namespaces/ns/pods/a%2Fb/log"
    assert objects.job_path("n s", "j") == "/apis/batch/v1/namespaces/n%20s/jobs/j"
    assert objects.jobset_path("ns", "js") == (
        "/apis/jobset.x-k8s.io/v1alpha2/namespaces/ns/jobsets/js"
    )


JOB = {
    "status": {
        "conditions": [
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"},
            {"type": "Complete", "status": "False", "message": "not yet"},
            {"type": "Suspended", "status": "True", "message": "queued"},
        ]
    }
}


def test_only_true_conditions_count():
    assert set(objects.true_conditions(JOB)) == {"Failed", "Suspended"}
    assert objects.true_conditions({}) == {} and objects.true_conditions({"status": None}) == {}


def test_a_conditions_text_is_its_reason_and_message_else_its_type():
    assert objects.condition_text({"reason": "R", "message": "m"}) == "R: m"
    assert objects.condition_text({"message": "m"}) == "m"
    assert objects.condition_text({"type": "Ready"}) == "Ready"


def test_a_true_conditions_message_falls_back_to_its_reason_then_its_type():
    assert objects.condition(JOB, "Suspended") == "queued"
    assert objects.condition(JOB, "Failed") == "BackoffLimitExceeded"
    assert objects.condition(JOB, "Complete") is None
    bare = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert objects.condition(bare, "Ready") == "Ready"


def test_a_manifest_becomes_the_clients_v1_job():
    job = objects.to_v1_job(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "job-x", "labels": {"a": "b"}},
            "spec": {"backoffLimit": 0, "template": {"spec": {"containers": []}}},
        }
    )
    assert job.metadata.name == "job-x" and job.metadata.labels == {"a": "b"}
    assert job.spec.backoff_limit == 0


def failing(status: int):
    def call(*args, **kwargs):
        raise ApiException(status=status)

    return call


def test_a_delete_of_something_gone_is_false_and_other_errors_are_raised():
    assert objects.ignore_gone(lambda **kw: None, name="x") is True
    assert objects.ignore_gone(failing(404)) is False
    with pytest.raises(ApiException):
        objects.ignore_gone(failing(403))


class Batch:
    """BatchV1Api's create_namespaced_job, answering `status` (201: created)."""

    calls: list[tuple[str, dict]] = []
    status = 201

    def __init__(self, api_client) -> None:
        pass

    def create_namespaced_job(self, namespace: str, body: dict) -> None:
        Batch.calls.append((namespace, body))
        if Batch.status != 201:
            raise ApiException(status=Batch.status)


def test_a_job_an_earlier_try_created_is_not_an_error(monkeypatch):
    monkeypatch.setattr(objects, "BatchV1Api", Batch)
    monkeypatch.setattr(Batch, "calls", [])
    assert objects.create_job(None, "ns", {"kind": "Job"}) is True
    monkeypatch.setattr(Batch, "status", 409)
    assert objects.create_job(None, "ns", {"kind": "Job"}) is False
    monkeypatch.setattr(Batch, "status", 500)
    with pytest.raises(ApiException):
        objects.create_job(None, "ns", {"kind": "Job"})
    assert Batch.calls == [("ns", {"kind": "Job"})] * 3


def test_the_backend_is_deleted_in_the_foreground(monkeypatch):
    deleted = []

    class Custom:
        def __init__(self, api_client) -> None:
            pass

        def delete_namespaced_custom_object(self, **kwargs) -> None:
            deleted.append(kwargs)

    monkeypatch.setattr(objects, "CustomObjectsApi", Custom)
    assert objects.delete_backend(None, "ns", "rl-1-backend") is True
    assert deleted == [
        {
            "namespace": "ns",
            "name": "rl-1-backend",
            "propagation_policy": "Foreground",
            **objects.JOBSET,
        }
    ]
