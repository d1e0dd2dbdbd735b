"""cluster_mode=existing: validate reads the cluster and refuses one the run cannot use."""

from __future__ import annotations

import json

import pytest
from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEHook
from google.api_core.exceptions import NotFound
from google.cloud.container_v1.types import Cluster

from tpu_rl.cluster.existing import existing_cluster_problem
from tpu_rl.settings.run_settings import load_settings


@pytest.fixture
def settings(tutorial_conf, monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", json.dumps({"conn_type": "google_cloud_platform"})
    )
    return load_settings({**tutorial_conf, "cluster_mode": "existing", "reservation": ""})


def answering(monkeypatch, answer, asked):
    def get_cluster(hook, name, project_id=None, **kwargs):
        asked.append((hook.location, project_id, name))
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(GKEHook, "get_cluster", get_cluster)


def test_a_standard_cluster_passes(settings, monkeypatch):
    asked: list = []
    answering(monkeypatch, Cluster(name="gemma4-rl"), asked)
    assert existing_cluster_problem(settings, "google_cloud_default") is None
    assert asked == [("us-east5", "my-tpu-project", "gemma4-rl")]


def test_an_autopilot_cluster_is_refused_saying_standard_is_required(settings, monkeypatch):
    answering(monkeypatch, Cluster(name="gemma4-rl", autopilot={"enabled": True}), [])
    problem = existing_cluster_problem(settings, "google_cloud_default")
    assert problem.startswith("cluster_name: 'gemma4-rl' is a GKE Autopilot cluster; the run ")
    assert "needs GKE Standard" in problem and "cluster_mode=create" in problem


def test_a_missing_cluster_is_named(settings, monkeypatch):
    answering(monkeypatch, NotFound("no such cluster"), [])
    problem = existing_cluster_problem(settings, "google_cloud_default")
    assert problem == (
        "cluster_name: no GKE cluster 'gemma4-rl' in project my-tpu-project, location "
        "us-east5 (cluster_mode=existing uses a cluster that exists; cluster_mode=create makes "
        "one)"
    )
