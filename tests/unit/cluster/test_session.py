"""A gcluster session (tpu_rl.cluster.session) with its tools replaced: the bundle and terraform
checked, each command run in a fresh folder with the connection's environment, a Spot stockout
said. The tools themselves: tests/integration/test_cluster_toolkit.py."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tpu_rl.cluster import session
from tpu_rl.cluster import toolkit as cluster_toolkit
from tpu_rl.cluster.toolkit import ClusterToolkitError
from tpu_rl.settings.run_settings import load_settings

STOCKOUT = "Error waiting for creating GKE NodePool: ZONE_RESOURCE_POOL_EXHAUSTED in us-east5-b"


@pytest.fixture
def runs(monkeypatch) -> dict[str, Any]:
    """The tools' calls; `runs["fail"]`: the error the next gcluster run raises."""
    made: dict[str, Any] = {"calls": [], "fail": None}

    @contextlib.contextmanager
    def google_env(conn_id: str, project: str):
        made["calls"].append(("env", conn_id, project))
        yield {"CLOUDSDK_CORE_PROJECT": project}, ["s3cr3t"]

    def prepare_workdir(tmp: Path, bundle: Path, on: Any, identity: str, prefix: str) -> Any:
        made["calls"].append(("prepare", tmp.name.startswith(f"gcluster-{on.cluster_name}-")))
        return SimpleNamespace(deploy=["gcluster", "deploy"], destroy=["gcluster", "destroy"])

    def run_gcluster(argv: list[str], cwd: Path, log: Any, **kwargs: Any) -> None:
        made["calls"].append(("run", argv, kwargs["env"], kwargs["secrets"], kwargs["timeout"]))
        if made["fail"]:
            raise ClusterToolkitError(made["fail"])

    monkeypatch.setattr(session, "google_env", google_env)
    monkeypatch.setattr(cluster_toolkit, "prepare_workdir", prepare_workdir)
    monkeypatch.setattr(cluster_toolkit, "run_gcluster", run_gcluster)
    return made


def open_session(**kwargs: Any) -> Any:
    return session.toolkit_session(
        Path("/b"), "p", "me", "conn", "state", 60.0, logging.getLogger("t"), **kwargs
    )


def test_each_command_runs_with_the_connections_environment_and_secrets(runs, tutorial_conf):
    settings = load_settings(tutorial_conf)
    with open_session() as gcluster:
        gcluster(settings, lambda steps: [steps.deploy, steps.destroy])
    env = {"CLOUDSDK_CORE_PROJECT": "p"}
    assert runs["calls"] == [
        ("env", "conn", "p"),
        ("prepare", True),
        ("run", ["gcluster", "deploy"], env, ["s3cr3t"], 60.0),
        ("run", ["gcluster", "destroy"], env, ["s3cr3t"], 60.0),
    ]


def test_a_spot_stockout_says_so_and_other_failures_are_as_they_were(runs, tutorial_conf):
    spot = load_settings({**tutorial_conf, "capacity": "spot", "reservation": ""})
    runs["fail"] = STOCKOUT
    with open_session() as gcluster, pytest.raises(ClusterToolkitError) as failed:
        gcluster(spot, lambda steps: [steps.deploy])
    assert str(failed.value).startswith("Spot stockout: us-east5-b had no 8 Spot")
    assert str(failed.value).endswith(STOCKOUT)
    runs["fail"] = "Error 403: permission denied"
    with open_session() as gcluster, pytest.raises(ClusterToolkitError) as failed:
        gcluster(spot, lambda steps: [steps.deploy])
    assert str(failed.value) == "Error 403: permission denied"


def test_the_bundle_is_the_pinned_version_in_the_cache_with_terraform_checked(
    monkeypatch, tutorial_conf, tmp_path
):
    settings = load_settings(tutorial_conf)
    asked = []
    monkeypatch.setattr(cluster_toolkit, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(
        cluster_toolkit,
        "ensure_bundle",
        lambda version, cache: asked.append((version, cache)) or cache / version,
    )
    monkeypatch.setattr(cluster_toolkit, "require_terraform", lambda: asked.append("terraform"))
    bundle = session.toolkit_bundle(settings)
    assert bundle == tmp_path / settings.cluster_toolkit_version
    assert asked == [(settings.cluster_toolkit_version, tmp_path), "terraform"]
