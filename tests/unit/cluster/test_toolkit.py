"""Cluster Toolkit's bundle and gcluster's runs (tpu_rl.cluster.toolkit): where the bundle comes
from and is kept, terraform found or named, secrets masked in gcluster's output. Downloads and
processes: tests/integration/test_cluster_toolkit.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.cloud import SANDBOX_BIN
from tpu_rl.cluster import blueprint
from tpu_rl.cluster import toolkit as cluster_toolkit
from tpu_rl.cluster.toolkit import ClusterToolkitError


def test_bundle_url_base_from_airflow_config(monkeypatch):
    monkeypatch.setenv("AIRFLOW__TPU_RL__GCLUSTER_RELEASE_BASE_URL", "http://mirror.internal/ct")
    assert cluster_toolkit.release_base_url() == "http://mirror.internal/ct"
    monkeypatch.delenv("AIRFLOW__TPU_RL__GCLUSTER_RELEASE_BASE_URL")
    assert cluster_toolkit.release_base_url() == blueprint.RELEASE_BASE_URL


def test_missing_terraform_is_a_clear_error(tmp_path):
    with pytest.raises(ClusterToolkitError, match=r"terraform is not on PATH.*Install Terraform"):
        cluster_toolkit.require_terraform(path=str(tmp_path))
    assert cluster_toolkit.require_terraform(path=str(SANDBOX_BIN)) == str(
        SANDBOX_BIN / "terraform"
    )


def test_the_bundle_cache_from_airflow_config(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW__TPU_RL__GCLUSTER_CACHE_DIR", str(tmp_path))
    assert cluster_toolkit.cache_dir() == tmp_path
    monkeypatch.delenv("AIRFLOW__TPU_RL__GCLUSTER_CACHE_DIR")
    assert cluster_toolkit.cache_dir() == Path(str(cluster_toolkit.DEFAULT_CACHE_DIR))


def test_a_secret_and_each_long_line_of_a_multi_line_one_are_masked():
    key = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\nab\n-----END PRIVATE KEY-----"
    text = f"leaked MIIEvQIBADANBg and s3cr3t-id in ab cd, key: {key}"
    masked = cluster_toolkit.mask(text, [key, "s3cr3t-id"])
    assert "MIIEvQIBADANBg" not in masked and "s3cr3t-id" not in masked
    assert "PRIVATE KEY" not in masked
    assert " ab cd" in masked  # a line under 6 characters is left: too common to mask
    assert cluster_toolkit.mask("nothing here", []) == "nothing here"
