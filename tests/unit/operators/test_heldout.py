"""evaluate_heldout: which models it scores, and the report it makes of the samples they kept
(tpu_rl.operators.heldout)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowException, AirflowSkipException

from tpu_rl import storage
from tpu_rl.layout import RunLayout
from tpu_rl.operators.heldout import MODELS_XCOM, EvaluateHeldoutOperator, heldout_limit_minutes
from tpu_rl.operators.jobs import RunJobStep
from tpu_rl.promotion import champion
from tpu_rl.promotion.champion import ChampionRecord
from tpu_rl.settings.run_settings import load_settings

CHAMPION_CHECKPOINT = "gs://b/gemma4-26b/trained/rl-old/checkpoints/actor/50/"


class TI:
    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value

    def xcom_pull(self, key: str = "return_value", **kwargs: Any) -> Any:
        return self.pushed.get(key)


@pytest.fixture
def step(tutorial_conf, monkeypatch) -> tuple[EvaluateHeldoutOperator, RunLayout]:
    conf = {**tutorial_conf, "heldout_tasks": ["gsm8k"], "heldout_top_k": 2}
    layout = RunLayout(load_settings(conf), "manual__h", "dep")
    op = EvaluateHeldoutOperator(rewards={"intermediate": [{"step": 20, "mean_reward": 0.5}]})
    monkeypatch.setattr(op, "run_layout", lambda context: layout)
    monkeypatch.setattr(storage, "checkpoint_steps", lambda uri, conn: [10, 20, 30])
    monkeypatch.setattr(storage, "step_committed", lambda uri, conn: True)
    record = ChampionRecord("r0", "gs://b/x/", CHAMPION_CHECKPOINT, 50, {}, "2026-11-26")
    monkeypatch.setattr(champion.ChampionStore, "read", lambda self: record)
    return op, layout


def test_it_scores_the_best_steps_the_base_model_and_the_champion(step):
    op, layout = step
    assert [tuple(m) for m in op.models(layout)] == [
        ("step-20", layout.checkpoint_params(20)),  # the trainer's best
        ("step-30", layout.checkpoint_params(30)),  # then the newest
        ("base", layout.maxtext_items),
        ("champion", f"{CHAMPION_CHECKPOINT}model_params/"),
    ]


def test_it_skips_when_off_and_its_limit_counts_each_model(step, tutorial_conf):
    op, layout = step
    off = RunLayout(load_settings(tutorial_conf), "manual__h", "dep")
    with pytest.raises(AirflowSkipException, match="held-out evaluation is off"):
        op.prepare(off, {"ti": TI()})
    s = layout.settings
    assert heldout_limit_minutes(s) == s.pending_timeout_minutes + 4 * s.heldout_timeout_minutes
    assert heldout_limit_minutes(off.settings) == 10


def samples(right: int, total: int = 100) -> str:
    """A samples file as the keeper writes it: GSM8K's two filters per item."""
    return json.dumps(
        [
            {"doc_id": i, "doc_hash": f"h{i}", "filter": name, "exact_match": float(i < right)}
            for i in range(total)
            for name in ("strict-match", "flexible-extract")
        ]
    )


def test_the_report_of_the_kept_samples_names_the_best_step(step, monkeypatch):
    op, layout = step
    kept = {"step-20": samples(70), "step-30": samples(80), "base": samples(50)}
    monkeypatch.setattr(
        storage,
        "read_text",
        lambda uri, conn: kept.get(uri.removeprefix(layout.heldout_dir).split("/")[0]),
    )
    monkeypatch.setattr(RunJobStep, "execute_complete", lambda self, context, event: None)
    ti = TI()
    ti.xcom_push(MODELS_XCOM, [[label, "gs://x/"] for label in kept])
    report = op.execute_complete({"ti": ti}, {"status": "success"})
    assert report["step"] == 30 and report["step_scores"] == {"20": 0.7, "30": 0.8}
    assert ti.pushed["return_value"] == report
    ti.xcom_push(MODELS_XCOM, [["step-20", "gs://x/"], ["champion", "gs://y/"]])
    with pytest.raises(AirflowException, match="champion kept no samples of gsm8k"):
        op.execute_complete({"ti": ti}, {"status": "success"})
