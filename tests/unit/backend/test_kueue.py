"""Kueue: the backend's queue covers what it asks for; an inadmissible Workload ends the wait."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException, TaskDeferred
from kubernetes.client.rest import ApiException

from tests.support.kueue import UNCOVERED, workload
from tpu_rl.backend import jobset as pathways_jobset
from tpu_rl.backend import kueue
from tpu_rl.dag import runtime
from tpu_rl.kube import verdicts
from tpu_rl.operators.backend import StartPathwaysBackendOperator


def blueprint_queue(covered: list[str]) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cluster-queue", "resourceVersion": "7"},
        "spec": {"resourceGroups": [{"coveredResources": covered, "flavors": []}]}
        if covered
        else {},
    }


class FakeCustom:
    """CustomObjectsApi over a dict of Kueue objects, recording writes."""

    def __init__(self, cluster_queue: dict | None, workloads: list[dict] = ()) -> None:
        self.cluster_queue = cluster_queue
        self.local_queue = {"spec": {"clusterQueue": "cluster-queue"}}
        self.workloads = list(workloads)
        self.writes: list[tuple[str, Any]] = []

    def get_namespaced_custom_object(self, group, version, namespace, plural, name):
        if plural == "localqueues":
            if self.local_queue is None:
                raise ApiException(status=404)
            assert (group, version, namespace, name) == (
                kueue.GROUP,
                "v1beta2",
                "default",
                "user-queue",
            )
            return self.local_queue
        return {"status": {}}  # the JobSet

    def get_cluster_custom_object(self, group, version, plural, name):
        assert (plural, name) == ("clusterqueues", "cluster-queue")
        if self.cluster_queue is None:
            raise ApiException(status=404)
        return copy.deepcopy(self.cluster_queue)

    def create_cluster_custom_object(self, group, version, plural, body):
        self.writes.append((f"create {plural}", body["metadata"]["name"]))

    def replace_cluster_custom_object(self, group, version, plural, name, body):
        self.writes.append((f"replace {plural}", body))

    def create_namespaced_custom_object(self, group, version, namespace, plural, body):
        self.writes.append((f"create {plural}", body["metadata"]["name"]))

    def list_namespaced_custom_object(self, group, version, namespace, plural):
        assert plural == "workloads"
        return {"items": self.workloads}


class Log:
    def info(self, *args: Any) -> None:
        pass


def test_the_backend_requests_tpu_cpu_and_memory(layout):
    assert kueue.requested_resources(pathways_jobset.backend_jobset(layout)) == {
        "google.com/tpu",
        "cpu",
        "memory",
    }


def test_a_covering_queue_lets_the_backend_through_untouched(layout):
    api = FakeCustom(blueprint_queue(["google.com/tpu", "cpu", "memory"]))
    kueue.ensure_coverage(api, layout, pathways_jobset.backend_jobset(layout), Log())
    assert api.writes == []


def test_a_tpu_only_queue_is_refused_naming_the_queue_and_the_missing_resources(layout):
    api = FakeCustom(blueprint_queue(["google.com/tpu"]))
    with pytest.raises(kueue.KueueError) as err:
        kueue.ensure_coverage(api, layout, pathways_jobset.backend_jobset(layout), Log())
    message = str(err.value)
    assert "ClusterQueue 'cluster-queue' (LocalQueue default/user-queue)" in message
    assert "does not cover cpu, memory" in message and api.writes == []


def test_an_empty_queue_is_filled_as_gcluster_does(layout):
    api = FakeCustom(blueprint_queue([]))
    kueue.ensure_coverage(api, layout, pathways_jobset.backend_jobset(layout), Log())
    assert api.writes[:2] == [
        ("create resourceflavors", "tpu-flavor"),
        ("create resourceflavors", "pathways-flavor"),
    ]
    kind, body = api.writes[2]
    assert kind == "replace clusterqueues" and body["metadata"]["resourceVersion"] == "7"
    assert kueue.covered_resources(body) == {"google.com/tpu", "cpu", "memory"}
    tpu_quota = body["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert tpu_quota == {"name": "google.com/tpu", "nominalQuota": 32}


def test_a_missing_local_or_cluster_queue_is_a_clear_error(layout):
    api = FakeCustom(blueprint_queue(["google.com/tpu"]))
    api.local_queue = None
    with pytest.raises(kueue.KueueError, match="LocalQueue default/user-queue does not exist"):
        kueue.ensure_coverage(api, layout, pathways_jobset.backend_jobset(layout), Log())
    with pytest.raises(kueue.KueueError, match="ClusterQueue 'cluster-queue' of LocalQueue"):
        kueue.ensure_coverage(
            FakeCustom(None), layout, pathways_jobset.backend_jobset(layout), Log()
        )


def test_start_backend_refuses_an_uncovering_queue_before_submitting(layout, monkeypatch):
    api = FakeCustom(blueprint_queue(["google.com/tpu"]))
    op = backend_operator(monkeypatch, layout, api, pods=[])
    with pytest.raises(AirflowFailException, match="does not cover cpu, memory"):
        op.execute({})
    assert api.writes == []  # no JobSet


def test_start_backend_waits_in_the_triggerer_watching_kueue(layout, monkeypatch):
    api = FakeCustom(blueprint_queue(["google.com/tpu", "cpu", "memory"]))
    op = backend_operator(monkeypatch, layout, api, pods=[])
    with pytest.raises(TaskDeferred) as deferred:
        op.execute({})
    assert api.writes == [("create jobsets", layout.backend_jobset)]
    kwargs = deferred.value.trigger.kwargs
    assert kwargs["queued"] is True and kwargs["need_running"] is True


def test_kueues_refusal_fails_start_backend_without_retries(layout, monkeypatch):
    workloads = [
        workload("someone-else", "Pending", "x"),
        workload(layout.backend_jobset, "Pending", UNCOVERED),
    ]
    what = f"JobSet {layout.backend_jobset}"
    assert verdicts.kueue_refusal(what, workloads, "JobSet", "someone-else-not") is None
    reason, message = verdicts.kueue_refusal(what, workloads, "JobSet", layout.backend_jobset)
    assert reason == verdicts.KUEUE_REFUSED
    assert UNCOVERED in message and f"jobset-{layout.backend_jobset}-1a2b3" in message
    op = backend_operator(monkeypatch, layout, FakeCustom(blueprint_queue([])), pods=[])
    event = {"status": "error", "reason": reason, "message": message}
    with pytest.raises(AirflowFailException, match="Kueue cannot admit"):
        op.execute_complete({}, event)


def backend_operator(monkeypatch, layout, api, pods):
    monkeypatch.setattr(runtime, "layout_from_context", lambda context: layout)
    cluster = {"project_id": "p", "location": "l", "cluster_name": "c"}
    op = StartPathwaysBackendOperator(task_id="start_backend", **cluster)
    op.__dict__["custom"] = api
    monkeypatch.setattr(type(op), "cluster_info", property(lambda self: ("https://k", "ca")))
    return op
