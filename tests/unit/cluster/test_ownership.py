"""Whose a cluster of cluster_mode=create is (tpu_rl.cluster.ownership): its deployment label,
read through the GKE hook."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from google.api_core.exceptions import NotFound

from tpu_rl.cluster import ownership
from tpu_rl.cluster.blueprint import CLUSTER_DEPLOYMENT_LABEL
from tpu_rl.settings.run_settings import load_settings


@pytest.fixture
def labels(monkeypatch):
    """The resource labels the named cluster has (None: no such cluster); the hook's calls."""
    found: dict = {"labels": None, "calls": []}

    class Hook:
        def __init__(self, gcp_conn_id: str, location: str) -> None:
            self.location = location

        def get_cluster(self, name: str, project_id: str):
            found["calls"].append((project_id, self.location, name))
            if found["labels"] is None:
                raise NotFound("no cluster")
            return SimpleNamespace(resource_labels=found["labels"])

    monkeypatch.setattr(ownership, "GKEHook", Hook)
    return found


def test_no_cluster_or_this_deployments_is_not_foreign(tutorial_conf, labels):
    settings = load_settings(tutorial_conf)
    assert ownership.foreign_cluster(settings, "c", "mine") is None
    assert labels["calls"] == [("my-tpu-project", "us-east5", settings.cluster_name)]
    labels["labels"] = {CLUSTER_DEPLOYMENT_LABEL: "mine"}
    assert ownership.foreign_cluster(settings, "c", "mine") is None


def test_another_deployments_cluster_or_an_unlabelled_one_is_left_alone(tutorial_conf, labels):
    settings = load_settings(tutorial_conf)
    labels["labels"] = {CLUSTER_DEPLOYMENT_LABEL: "theirs"}
    why = ownership.foreign_cluster(settings, "c", "mine")
    assert why is not None and "belongs to deployment 'theirs'" in why
    assert "not to this run's ('mine')" in why and "cluster_mode=existing" in why
    labels["labels"] = {}
    why = ownership.foreign_cluster(settings, "c", "mine")
    assert why is not None and "belongs to no deployment of this product" in why
