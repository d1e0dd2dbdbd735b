"""tpu_rl.promotion.promote: the record a promotion writes, the model it uploads, and its refusal
when the champion changed since the comparison (the whole promotion against a store and a
registry: tests/integration/test_promotion*.py)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from tests.support.heldout import GSM8K, heldout
from tests.support.promotion import IMAGE, MemoryChampionStore, compared, exported, layout
from tpu_rl.promotion import promote
from tpu_rl.promotion.champion import ChampionRecord
from tpu_rl.promotion.promote import (
    PREVIOUS_KEPT,
    PromotionFailed,
    champion_record,
    check_compared,
    vertex_model,
)
from tpu_rl.promotion.registry import RegisteredVersion


def record(export_uri: str, previous: list[str]) -> ChampionRecord:
    return ChampionRecord("run-0", export_uri, "gs://b/ck/1/", 1, {}, "2026-01-01", previous)


def test_the_first_champion_has_no_previous(tutorial_conf):
    run = layout(tutorial_conf, "manual__1")
    made = champion_record(run, exported(run, 40, 0.5), None)
    assert (made.run_id, made.export_uri, made.step) == ("manual__1", run.export_dir, 40)
    assert made.metrics == {"accuracy": 0.5, "mean_reward": 1.25} and made.previous == []


def test_an_intermediate_steps_line_fields_stay_out_of_the_records_metrics(tutorial_conf):
    """An export of an intermediate step carries its Intermediate Eval line: its kind and time
    are text, which a record's metrics may not hold (ChampionStore.read refused the record, so
    the deployment's next evaluate_champion and promote failed)."""
    run = layout(tutorial_conf, "manual__1")
    line = {"kind": "intermediate", "attempt": 1, "step": 30, "time": "12:00:01"}
    export = exported(run, 30, 0.5)
    export.metrics.update(line)
    made = champion_record(run, export, None)
    assert made.metrics == {"accuracy": 0.5, "mean_reward": 1.25}
    assert ChampionRecord.from_dict(made.as_dict()) == made


def test_the_replaced_champion_heads_previous_which_keeps_the_newest_and_never_itself(
    tutorial_conf,
):
    run = layout(tutorial_conf, "manual__2")
    older = [f"gs://b/old-{i}/" for i in range(PREVIOUS_KEPT + 5)]
    made = champion_record(run, exported(run, 40, 0.5), record("gs://b/champ/", older))
    assert made.previous == ["gs://b/champ/", *older][:PREVIOUS_KEPT]
    again = champion_record(run, exported(run, 40, 0.5), record(run.export_dir, ["gs://b/a/"]))
    assert again.previous == ["gs://b/a/"]


def test_the_uploaded_model_names_the_export_the_serving_image_and_the_run(
    tutorial_conf, monkeypatch
):
    monkeypatch.setenv("TPU_RL_VERTEX_SERVING_IMAGE", IMAGE)
    run = layout(tutorial_conf, "manual__3")
    model = vertex_model(run, exported(run, 40, 0.5), "gemma-rl")
    assert model["artifact_uri"] == run.export_dir and model["display_name"] == "gemma-rl"
    assert model["container_spec"] == {"image_uri": IMAGE}
    assert model["version_description"] == "run manual__3, step 40: accuracy=0.5, mean_reward=1.25"
    assert model["labels"]["tpu-rl-run"] == run.slug
    assert not any("heldout" in key for key in model["labels"])


def test_the_uploaded_model_is_labelled_with_the_held_out_evaluation(tutorial_conf, monkeypatch):
    monkeypatch.setenv("TPU_RL_VERTEX_SERVING_IMAGE", IMAGE)
    run = layout(tutorial_conf, "manual__3")
    model = vertex_model(run, exported(run, 40, 0.5), "gemma-rl", heldout(GSM8K, step=40))
    labels = model["labels"]
    assert labels["tpu-rl-heldout_step"] == "40" and labels["tpu-rl-heldout_gsm8k_acc"] == "760"
    assert labels["tpu-rl-heldout_gsm8k_vs_base"] == "better"


def test_a_promotion_registers_the_version_with_the_held_out_labels(tutorial_conf, monkeypatch):
    monkeypatch.setenv("TPU_RL_VERTEX_REGISTRY", "gemma-rl")
    monkeypatch.setenv("TPU_RL_VERTEX_SERVING_IMAGE", IMAGE)
    monkeypatch.setattr(MemoryChampionStore, "records", {})
    monkeypatch.setattr(promote, "ChampionStore", MemoryChampionStore)
    uploaded = []

    def register(layout, model_id, model, gcp_conn_id, current):
        uploaded.append(model)
        return RegisteredVersion("projects/p/locations/r/models/gemma-rl", "1")

    monkeypatch.setattr(promote, "register", register)
    run = layout(tutorial_conf, "manual__4")
    log = logging.getLogger(__name__)
    promote.promote_export(run, exported(run, 40, 0.5), compared(0), "gcp", log, heldout(GSM8K))
    assert uploaded[0]["labels"]["tpu-rl-heldout_gsm8k_acc"] == "760"


def store(generation: int) -> SimpleNamespace:
    return SimpleNamespace(generation=generation, uri="gs://b/m/champions/dep.json")


def test_the_comparisons_generation_is_the_stores_or_nothing_is_promoted():
    check_compared(store(3), None, {"champion_generation": 3})
    with pytest.raises(PromotionFailed) as changed:
        check_compared(store(4), record("gs://b/new/", []), {"champion_generation": 3})
    assert "gs://b/m/champions/dep.json is now generation 4, gs://b/new/ (run run-0)" in str(
        changed.value
    )
    assert changed.value.state == (
        "the champion changed since the comparison; the record still names gs://b/new/ (run run-0)"
    )
    with pytest.raises(PromotionFailed) as missing:
        check_compared(store(0), None, None)
    assert missing.value.state == "no comparison recorded; the record still names no champion"
