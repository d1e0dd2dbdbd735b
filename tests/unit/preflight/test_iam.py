"""tpu_rl.preflight.iam: the pools' write roles as the real project grants them:
storage.objectUser, a grant on the bucket, the "default" compute account."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from google.cloud import resourcemanager_v3
from google.iam.v1 import policy_pb2

from tpu_rl.preflight import iam
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


class Granting(ProjectApi):
    """The project's testIamPermissions, granting `granted`."""

    def __init__(self, granted: set[str]) -> None:
        super().__init__([])
        self.granted = granted

    def test_iam_permissions(self, request: Any, **_: Any) -> Any:
        return SimpleNamespace(permissions=[p for p in request.permissions if p in self.granted])


def test_creating_a_cluster_needs_more_than_using_one(tutorial_conf):
    existing = load_settings({**tutorial_conf, "cluster_mode": "existing"})
    assert iam.needed_permissions(existing) == iam.EVERY_RUN
    assert iam.needed_permissions(load_settings(tutorial_conf)) == (
        iam.EVERY_RUN + iam.CREATING_A_CLUSTER
    )


def test_the_callers_missing_permissions_are_named(tutorial_conf):
    s = load_settings(tutorial_conf)
    wanted = iam.needed_permissions(s)
    [granted] = iam.check_caller(Granting(set(wanted)), s)
    assert (
        granted.passed and granted.evidence == f"{len(wanted)} permissions granted on {s.project}"
    )
    [lacking] = iam.check_caller(Granting(set(wanted[1:])), s)
    assert not lacking.passed
    assert lacking.evidence == f"the deployment's credentials lack {wanted[0]} on {s.project}"
