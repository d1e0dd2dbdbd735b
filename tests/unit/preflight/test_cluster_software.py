"""tpu_rl.preflight.cluster_software: an existing cluster's JobSet and Kueue controllers at their
minimum versions, a ClusterQueue covering the run's requests, the deployment's PriorityClass."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from tpu_rl.backend.jobset import backend_jobset
from tpu_rl.backend.kueue import requested_resources
from tpu_rl.cluster.kueue_config import TPU
from tpu_rl.layout import RunLayout
from tpu_rl.preflight import cluster_software
from tpu_rl.preflight.cluster_software import (
    INSTALL,
    check_controller,
    check_priority_class,
    check_queue,
)
from tpu_rl.settings.run_settings import load_settings


def deployment_running(*images: str) -> Any:
    containers = [SimpleNamespace(image=image) for image in images]
    return SimpleNamespace(
        spec=SimpleNamespace(template=SimpleNamespace(spec=SimpleNamespace(containers=containers)))
    )


def apps_api(monkeypatch: pytest.MonkeyPatch, found: Any) -> list[tuple[str, str]]:
    """AppsV1Api's read of a Deployment: `found`, or 404 when None; the reads made."""
    reads: list[tuple[str, str]] = []

    def read_namespaced_deployment(name: str, namespace: str) -> Any:
        reads.append((namespace, name))
        if found is None:
            raise ApiException(status=404, reason="Not Found")
        return found

    api = SimpleNamespace(read_namespaced_deployment=read_namespaced_deployment)
    monkeypatch.setattr(cluster_software, "AppsV1Api", lambda client: api)
    return reads


def test_a_controller_at_its_minimum_or_later_passes(monkeypatch):
    reads = apps_api(monkeypatch, deployment_running("registry.k8s.io/kueue/kueue:v0.15.2"))
    result = check_controller(None, "kueue")
    assert result.passed and result.evidence.startswith("registry.k8s.io/kueue/kueue:v0.15.2")
    assert reads == [("kueue-system", "kueue-controller-manager")]


@pytest.mark.parametrize("image", ["r/jobset:v0.9.9", "r/jobset:latest"])
def test_an_older_or_unversioned_controller_fails_with_the_install(monkeypatch, image):
    apps_api(monkeypatch, deployment_running(image))
    result = check_controller(None, "jobset")
    assert not result.passed and result.evidence == (
        f"jobset runs {image}; the run needs v0.10.1 or later"
    )
    assert result.fix == INSTALL["jobset"]


def test_a_missing_controller_is_not_installed(monkeypatch):
    apps_api(monkeypatch, None)
    result = check_controller(None, "jobset")
    assert not result.passed and "jobset is not installed" in result.evidence


class Queues:
    """CustomObjectsApi's reads of the run's LocalQueue and its ClusterQueue."""

    def __init__(self, cluster_queue: dict | None) -> None:
        self.cluster_queue = cluster_queue

    def get_namespaced_custom_object(self, **_: Any) -> dict:
        return {"spec": {"clusterQueue": "cq"}}

    def get_cluster_custom_object(self, name: str, **_: Any) -> dict:
        if self.cluster_queue is None:
            raise ApiException(status=404, reason="Not Found")
        assert name == "cq"
        return self.cluster_queue


@pytest.fixture
def layout(tutorial_conf) -> RunLayout:
    conf = {**tutorial_conf, "cluster_mode": "existing", "kueue_queue": "lq"}
    return RunLayout(load_settings(conf), "manual__q", "dep")


def queue_check(monkeypatch, layout: RunLayout, cluster_queue: dict | None):
    monkeypatch.setattr(cluster_software, "CustomObjectsApi", lambda c: Queues(cluster_queue))
    return check_queue(None, layout)


def covering(resources: set[str], tpu_quota: float) -> dict:
    flavor = {"resources": [{"name": TPU, "nominalQuota": tpu_quota}]}
    group = {"coveredResources": sorted(resources), "flavors": [flavor]}
    return {"spec": {"resourceGroups": [group]}}


def test_a_queue_covering_the_backends_requests_with_the_chips_passes(monkeypatch, layout):
    needed = requested_resources(backend_jobset(layout))
    result = queue_check(monkeypatch, layout, covering(needed, 32))
    assert result.passed and result.evidence.endswith("32 TPU chips for 32")


def test_a_queue_short_of_a_resource_or_of_chips_fails_naming_it(monkeypatch, layout):
    needed = requested_resources(backend_jobset(layout))
    lacking = queue_check(monkeypatch, layout, covering(needed - {"memory"}, 32))
    assert not lacking.passed and "not memory, which the Pathways backend requests" in (
        lacking.evidence
    )
    short = queue_check(monkeypatch, layout, covering(needed, 16))
    assert (
        not short.passed
        and short.evidence == "ClusterQueue cq holds 16 google.com/tpu, the run requests 32"
    )


def test_an_empty_queue_passes_and_a_missing_one_fails(monkeypatch, layout):
    assert queue_check(monkeypatch, layout, {"spec": {}}).passed
    assert not queue_check(monkeypatch, layout, None).passed


def test_the_priority_class_is_checked_only_when_the_deployment_names_one(monkeypatch):
    monkeypatch.delenv("TPU_RL_PRIORITY_CLASS", raising=False)
    assert check_priority_class(None).passed
    monkeypatch.setenv("TPU_RL_PRIORITY_CLASS", "high")

    def read_priority_class(name: str) -> Any:
        raise ApiException(status=404, reason="Not Found")

    api = SimpleNamespace(read_priority_class=read_priority_class)
    monkeypatch.setattr(cluster_software, "SchedulingV1Api", lambda client: api)
    missing = check_priority_class(None)
    assert not missing.passed and missing.evidence == "no PriorityClass 'high' in the cluster"
    api.read_priority_class = lambda name: SimpleNamespace(value=1000)
    assert check_priority_class(None).evidence == "PriorityClass high exists (value 1000)"
