"""Preflight against what the real cloud holds (issue 42, findings 3 and 7): a pool running
as the "default" account, write roles granted as storage.objectUser or on the bucket, a zonal
existing cluster, and a calendar reservation delivered under its `namePrefix`."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from google.api_core.exceptions import NotFound
from google.cloud import resourcemanager_v3
from google.iam.v1 import policy_pb2

from tpu_rl.preflight import calendar_reservation, cluster, iam
from tpu_rl.settings.run_settings import load_settings

POOL_SA = "gke-np@proj.iam.gserviceaccount.com"


class ProjectApi:
    """Resource Manager v3 as the project has it: projects.get and getIamPolicy, answered by
    its typed client (google.cloud.resourcemanager_v3.ProjectsClient)."""

    def __init__(self, bindings: list[dict[str, Any]]) -> None:
        self.bindings = bindings

    def client(self, client_class: type, host: str) -> Any:
        assert client_class is resourcemanager_v3.ProjectsClient, client_class
        return self

    def get_project(self, request: Any, **_: Any) -> Any:
        return resourcemanager_v3.Project(name="projects/123456789012", project_id="proj")

    def get_iam_policy(self, request: Any, **_: Any) -> Any:
        assert request.options.requested_policy_version == 3
        return policy_pb2.Policy(version=1, bindings=self.bindings)


@pytest.fixture
def bucket_bindings(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The run's bucket's own policy (buckets.getIamPolicy), through GCSHook."""
    bindings: list[dict[str, Any]] = []
    policy = SimpleNamespace(bindings=bindings)
    bucket = SimpleNamespace(get_iam_policy=lambda requested_policy_version: policy)
    client = SimpleNamespace(bucket=lambda name: bucket)
    monkeypatch.setattr(
        "airflow.providers.google.cloud.hooks.gcs.GCSHook.__init__", lambda self, **kw: None
    )
    monkeypatch.setattr(
        "airflow.providers.google.cloud.hooks.gcs.GCSHook.get_conn", lambda self: client
    )
    return bindings


def _settings(conf: dict[str, Any], **more: Any) -> Any:
    return load_settings({**conf, **more})


def test_object_user_on_the_project_is_a_write_role(tutorial_conf, bucket_bindings):
    api = ProjectApi(
        [{"role": "roles/storage.objectUser", "members": [f"serviceAccount:{POOL_SA}"]}]
    )
    result = iam.check_pool_roles(api, _settings(tutorial_conf), {"tpu": POOL_SA}, "gcp")
    assert result.passed, result.line()


def test_a_grant_on_the_bucket_is_enough(tutorial_conf, bucket_bindings):
    bucket_bindings.append(
        {"role": "roles/storage.objectAdmin", "members": [f"serviceAccount:{POOL_SA}"]}
    )
    result = iam.check_pool_roles(ProjectApi([]), _settings(tutorial_conf), {"tpu": POOL_SA}, "g")
    assert result.passed, result.line()


def test_a_default_pool_runs_as_the_compute_default_account(tutorial_conf, bucket_bindings):
    default = "serviceAccount:123456789012-compute@developer.gserviceaccount.com"
    api = ProjectApi([{"role": "roles/editor", "members": [default]}])
    result = iam.check_pool_roles(api, _settings(tutorial_conf), {"cpu-np": "default"}, "gcp")
    assert result.passed, result.line()
    lacking = iam.check_pool_roles(
        ProjectApi([]), _settings(tutorial_conf), {"cpu-np": "default"}, "gcp"
    )
    assert not lacking.passed and "123456789012-compute@" in lacking.evidence


def test_a_zonal_existing_cluster_is_found(tutorial_conf, monkeypatch):
    """clusters.get of projects/*/locations/<zone>/clusters/*: a zonal cluster is not under
    the region."""
    s = _settings(tutorial_conf, cluster_mode="existing")
    found = SimpleNamespace(name=s.cluster_name, location=s.zone)
    monkeypatch.setattr(
        "airflow.providers.google.cloud.hooks.kubernetes_engine.GKEHook.__init__",
        lambda self, gcp_conn_id, location: setattr(self, "_where", location),
    )

    def get_cluster(self: Any, name: str, project_id: str) -> Any:
        if self._where != s.zone:
            raise NotFound(f"projects/{project_id}/locations/{self._where}/clusters/{name}")
        return found

    monkeypatch.setattr(
        "airflow.providers.google.cloud.hooks.kubernetes_engine.GKEHook.get_cluster", get_cluster
    )
    assert cluster.read_cluster(s, "gcp") is found
    found.autopilot = SimpleNamespace(enabled=False)
    zonal = cluster.check_standard(s, found)
    assert not zonal.passed and f"is a zonal cluster (in {s.zone})" in zonal.evidence


def test_an_undelivered_prefix_reservation_stops_the_deploy(tutorial_conf, monkeypatch):
    """The pool consumes the delivered reservation; none delivered yet: refused, before
    gcluster runs."""
    s = _settings(tutorial_conf, capacity="calendar", reservation="v6e-calendar")
    window = calendar_reservation.Window("v6e-calendar", 0.0, 1e12, None, "v6e-cal")
    monkeypatch.setattr(calendar_reservation, "calendar_window", lambda s, conn: window)
    with pytest.raises(
        calendar_reservation.CalendarError, match="has delivered no reservation yet"
    ):
        calendar_reservation.delivered_settings(s, "gcp")
    delivered = calendar_reservation.Window(
        "v6e-calendar", 0.0, 1e12, "v6e-cal-20261204-0001", "v6e-cal"
    )
    monkeypatch.setattr(calendar_reservation, "calendar_window", lambda s, conn: delivered)
    assert calendar_reservation.delivered_settings(s, "gcp").reservation == "v6e-cal-20261204-0001"
