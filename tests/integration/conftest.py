"""Fixtures of the integration tier: the sandbox's emulators the modules are driven against (GCS,
Vertex AI's registry) and the seams patched to reach them; the Kubernetes API emulator's are
tests/conftest.py's (the reward wait's shells' own test modules in tests/unit use it too)."""

from __future__ import annotations

import pytest


@pytest.fixture
def gcs(monkeypatch):
    """The GCS emulator behind tpu_rl.storage's hook's client, with a bucket `bucket`."""
    from types import SimpleNamespace

    from sandbox.cloud import GcsEmulator
    from tpu_rl import storage

    emulator = GcsEmulator()
    emulator.client().create_bucket("bucket")
    monkeypatch.setattr(
        storage, "GCSHook", lambda gcp_conn_id: SimpleNamespace(get_conn=emulator.client)
    )
    yield emulator
    emulator.stop()


@pytest.fixture
def store(monkeypatch):
    """promote's champion records in memory (support.promotion.MemoryChampionStore)."""
    from tests.support.promotion import MemoryChampionStore
    from tpu_rl.promotion import promote

    MemoryChampionStore.records = {}
    monkeypatch.setattr(promote, "ChampionStore", MemoryChampionStore)
    return MemoryChampionStore


@pytest.fixture
def vertex(monkeypatch):
    """Vertex AI's Model Registry on a loopback fake (sandbox/vertex_api.py), the run's
    registry `support.promotion.MODEL_ID`, reached through the connection `gcp`."""
    import json

    from google.auth.credentials import AnonymousCredentials

    from sandbox.vertex_api import VertexRegistryFake
    from tests.support.promotion import IMAGE, MODEL_ID
    from tpu_rl.promotion.registry import RestModelServiceHook

    fake = VertexRegistryFake()
    monkeypatch.setenv("TPU_RL_API_ENDPOINTS", json.dumps(fake.endpoint_for("us-east5")))
    monkeypatch.setenv("TPU_RL_VERTEX_REGISTRY", MODEL_ID)
    monkeypatch.setenv("TPU_RL_VERTEX_SERVING_IMAGE", IMAGE)
    monkeypatch.setenv("AIRFLOW_CONN_GCP", json.dumps({"conn_type": "google_cloud_platform"}))
    # the seam: Google credentials (the process harness patches the same place)
    monkeypatch.setattr(
        RestModelServiceHook, "get_credentials", lambda self: AnonymousCredentials()
    )
    yield fake
    fake.stop()
