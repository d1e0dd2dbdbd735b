"""tpu_rl.promotion.registry: a promoted export as a new Vertex AI model version, its labels and
description, and the champion alias moved and moved back (against the registry's fake:
tests/integration/test_promotion.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from google.api_core.exceptions import NotFound

from tests.support.heldout import GSM8K, MMLU_FELL, heldout, row
from tpu_rl.promotion.registry import (
    DESCRIPTION_LIMIT,
    RegisteredVersion,
    restore_champion_alias,
    upload_version,
    version_description,
    version_labels,
)

MODEL_ID = "gemma-rl"
MODEL = f"projects/p/locations/r/models/{MODEL_ID}"


def test_labels_name_the_run_the_deployment_and_the_step_when_known():
    assert version_labels("rl-abc", "dep", 40) == {
        "tpu-rl-run": "rl-abc",
        "tpu-rl-deployment": "dep",
        "tpu-rl-step": "40",
    }
    assert "tpu-rl-step" not in version_labels("rl-abc", "dep", None)


def test_a_held_out_evaluation_labels_its_step_scores_and_verdicts_within_vertexs_64():
    labels = version_labels("rl-abc", "dep", 100, heldout(GSM8K, MMLU_FELL))
    assert labels == {
        "tpu-rl-run": "rl-abc",
        "tpu-rl-deployment": "dep",
        "tpu-rl-step": "100",
        "tpu-rl-heldout_step": "100",
        "tpu-rl-heldout_gsm8k_acc": "760",
        "tpu-rl-heldout_gsm8k_vs_champion": "not_distinguishable",
        "tpu-rl-heldout_gsm8k_vs_base": "better",
    }
    assert version_labels("rl-abc", "dep", 100, None) == version_labels("rl-abc", "dep", 100)
    many = heldout(*(row(f"task{i}", (600, 160, 40, 200), (700, 60, 40, 200)) for i in range(30)))
    assert len(version_labels("rl-abc", "dep", 100, many)) == 3 + 1 + 3 * 20  # 64 at most
    assert len(version_labels("rl-abc", "dep", None, many)) == 2 + 1 + 3 * 20


def test_the_description_rounds_the_metrics_and_fits_the_limit():
    text = version_description("manual__1", None, {"accuracy": 0.412345, "corr": 12})
    assert text == "run manual__1, step n/a: accuracy=0.4123, corr=12"
    assert len(version_description("r", 1, {f"m{i}": 0.5 for i in range(500)})) == (
        DESCRIPTION_LIMIT
    )


class ModelService:
    """ModelServiceClient's calls a version's upload makes, over the models that exist."""

    def __init__(self, models: dict[str, Any]) -> None:
        self.models, self.uploads = models, []

    def model_path(self, project: str, region: str, model_id: str) -> str:
        return f"projects/{project}/locations/{region}/models/{model_id}"

    def common_location_path(self, project: str, region: str) -> str:
        return f"projects/{project}/locations/{region}"

    def get_model(self, request: dict) -> Any:
        if request["name"] not in self.models:
            raise NotFound(request["name"])
        return self.models[request["name"]]

    def upload_model(self, request: dict) -> Any:
        self.uploads.append(request)
        answer = SimpleNamespace(model=MODEL, model_version_id="7")
        return SimpleNamespace(result=lambda: answer)


def upload(models: dict[str, Any]) -> tuple[RegisteredVersion, dict]:
    client = ModelService(models)
    hook = SimpleNamespace(get_model_service_client=lambda region: client)
    version = upload_version(hook, project="p", region="r", model_id="gemma-rl", model={"a": 1})
    [request] = client.uploads
    return version, request


def test_the_first_promotion_makes_the_model_with_its_id():
    version, request = upload({})
    assert request == {
        "parent": "projects/p/locations/r",
        "model": {"a": 1},
        "model_id": "gemma-rl",
    }
    assert version == RegisteredVersion(MODEL, "7", None) and version.name == f"{MODEL}@7"


def test_a_later_one_adds_a_version_and_remembers_the_champions():
    champion = SimpleNamespace(version_id="3")
    version, request = upload({MODEL: object(), f"{MODEL}@champion": champion})
    assert request["parent_model"] == MODEL and "model_id" not in request
    assert version.previous_champion == "3"
    _, without = upload({MODEL: object()})
    assert without["parent_model"] == MODEL


class AliasHook:
    """ModelServiceHook's alias calls, recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, list[str]]] = []

    def add_version_aliases(self, *, model_id: str, version_aliases: list[str], **_: Any) -> None:
        self.calls.append(("add", model_id, version_aliases))

    def delete_version_aliases(
        self, *, model_id: str, version_aliases: list[str], **_: Any
    ) -> None:
        self.calls.append(("delete", model_id, version_aliases))


def test_the_alias_goes_back_to_the_previous_champion_or_off_the_version():
    hook = AliasHook()
    where = {"project": "p", "region": "r", "model_id": "gemma-rl"}
    restore_champion_alias(hook, **where, version=RegisteredVersion(MODEL, "7", "3"))
    restore_champion_alias(hook, **where, version=RegisteredVersion(MODEL, "7", None))
    assert hook.calls == [
        ("add", "gemma-rl@3", ["champion"]),
        ("delete", "gemma-rl@7", ["champion"]),
    ]
