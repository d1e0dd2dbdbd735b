"""promote: the champion record, the asset event's facts, and Vertex AI Model Registry through
its REST API on a loopback fake (sandbox/vertex_api.py): the model read, exactly an upload
and an alias move per promotion, the previous champion kept as a version."""

from __future__ import annotations

import logging

import pytest

from tests.support.promotion import IMAGE, MODEL_ID, compared, exported, layout
from tpu_rl.promotion import promote
from tpu_rl.promotion.registry import CHAMPION_ALIAS

LOG = logging.getLogger(__name__)


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
