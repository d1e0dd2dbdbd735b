"""promote: the champion record, the asset event's facts, and Vertex AI Model Registry through
its REST API on a loopback fake (sandbox/vertex_api.py): the model read, exactly an upload
and an alias move per promotion, the previous champion kept as a version."""

from __future__ import annotations

import json
import logging

import pytest
from google.auth.credentials import AnonymousCredentials

from sandbox.vertex_api import VertexRegistryFake
from tpu_rl.layout import RunLayout
from tpu_rl.promotion import promote
from tpu_rl.promotion.champion import ChampionRecord
from tpu_rl.promotion.exported import ExportedModel
from tpu_rl.promotion.registry import CHAMPION_ALIAS, RestModelServiceHook
from tpu_rl.settings.run_settings import load_settings

MODEL_ID = "gemma-rl"
IMAGE = "us-docker.pkg.dev/serving/vllm@sha256:" + "a" * 64
LOG = logging.getLogger(__name__)


class MemoryChampionStore:
    """ChampionStore's read and write over one in-memory record per URI, with its generation
    precondition (a write after another's fails, as GCS answers 412)."""

    records: dict[str, tuple[int, dict]] = {}

    def __init__(self, model_root: str, deployment: str, gcp_conn_id: str) -> None:
        self.uri = f"{model_root}/champions/{deployment}.json"
        self.generation = 0

    def read(self) -> ChampionRecord | None:
        self.generation, value = self.records.get(self.uri, (0, None))
        return None if value is None else ChampionRecord.from_dict(value)

    def write(self, record: ChampionRecord) -> None:
        current = self.records.get(self.uri, (0, None))[0]
        assert current == self.generation, "412 Precondition Failed"
        self.records[self.uri] = (current + 1, json.loads(json.dumps(record.as_dict())))


@pytest.fixture
def store(monkeypatch):
    MemoryChampionStore.records = {}
    monkeypatch.setattr(promote, "ChampionStore", MemoryChampionStore)
    return MemoryChampionStore


@pytest.fixture
def vertex(monkeypatch):
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


def compared(generation: int) -> dict:
    """compare_champion's result as promote reads it: the record generation it compared with."""
    return {"beats": True, "champion_generation": generation}


def layout(tutorial_conf, run_id: str) -> RunLayout:
    return RunLayout(load_settings(tutorial_conf), run_id, "test-deployment")


def exported(run: RunLayout, step: int, accuracy: float) -> ExportedModel:
    return ExportedModel(
        export_uri=run.export_dir,
        checkpoint_uri=f"{run.checkpoints_dir}{step}/",
        step=step,
        metrics={"accuracy": accuracy, "mean_reward": 1.25},
    )


def test_a_promotion_without_a_registry_writes_the_record_and_keeps_the_previous(
    tutorial_conf, store, monkeypatch
):
    monkeypatch.delenv("TPU_RL_VERTEX_REGISTRY", raising=False)
    first, second = layout(tutorial_conf, "run-1"), layout(tutorial_conf, "run-2")
    promote.promote_export(first, exported(first, 50, 0.4), compared(0), "gcp", LOG)
    result = promote.promote_export(second, exported(second, 100, 0.5), compared(1), "gcp", LOG)
    assert result["registry_version"] is None
    assert (result["run_id"], result["step"], result["metrics"]["accuracy"]) == ("run-2", 100, 0.5)
    ((generation, record),) = store.records.values()
    assert generation == 2 and record["export_uri"] == second.export_dir
    assert record["previous"] == [first.export_dir]
    # a retry of the same promotion finds its own record and writes nothing
    promote.promote_export(second, exported(second, 100, 0.5), compared(1), "gcp", LOG)
    assert next(iter(store.records.values()))[0] == 2


def test_a_promotion_uploads_a_version_and_moves_the_champion_alias(tutorial_conf, store, vertex):
    first, second = layout(tutorial_conf, "run-1"), layout(tutorial_conf, "run-2")
    promote.promote_export(first, exported(first, 50, 0.4), compared(0), "gcp", LOG)
    # the model's first version: models.get answers 404, so the upload makes the model with
    # its id (UploadModelRequest.modelId), not into a parent model
    assert [(c.method, c.path.rsplit("/", 1)[-1]) for c in vertex.calls] == [
        ("GET", MODEL_ID),
        ("POST", "models:upload"),
        ("POST", f"{MODEL_ID}@1:mergeVersionAliases"),
    ]
    assert vertex.calls[1].body["modelId"] == MODEL_ID and "parentModel" not in vertex.calls[1].body
    vertex.calls.clear()
    result = promote.promote_export(second, exported(second, 100, 0.5), compared(1), "gcp", LOG)
    location = "/v1/projects/my-tpu-project/locations/us-east5"
    model_read, holder_read, upload, alias = vertex.calls  # exactly one upload and alias move
    assert (model_read.method, model_read.path) == ("GET", f"{location}/models/{MODEL_ID}")
    assert holder_read.path == f"{location}/models/{MODEL_ID}@{CHAMPION_ALIAS}"
    assert upload.path == f"{location}/models:upload"
    assert upload.body["parentModel"] == location.removeprefix("/v1/") + f"/models/{MODEL_ID}"
    model = upload.body["model"]
    assert model["artifactUri"] == second.export_dir
    assert model["containerSpec"]["imageUri"] == IMAGE
    assert model["labels"] == {
        "tpu-rl-run": second.slug,
        "tpu-rl-deployment": "test-deployment",
        "tpu-rl-step": "100",
    }
    assert model["versionDescription"] == "run run-2, step 100: accuracy=0.5, mean_reward=1.25"
    assert alias.path == f"{location}/models/{MODEL_ID}@2:mergeVersionAliases"
    assert alias.body == {"versionAliases": [CHAMPION_ALIAS]}
    versions = vertex.models[MODEL_ID].versions
    assert [v["versionAliases"] for v in versions] == [["default"], [CHAMPION_ALIAS]]
    assert result["registry_version"].endswith(f"/models/{MODEL_ID}@2")


def test_a_registry_needs_a_serving_image(tutorial_conf, store, vertex, monkeypatch):
    monkeypatch.delenv("TPU_RL_VERTEX_SERVING_IMAGE")
    run = layout(tutorial_conf, "run-1")
    with pytest.raises(promote.PromotionFailed, match="TPU_RL_VERTEX_SERVING_IMAGE"):
        promote.promote_export(run, exported(run, 50, 0.4), compared(0), "gcp", LOG)
    assert vertex.calls == [] and store.records == {}
