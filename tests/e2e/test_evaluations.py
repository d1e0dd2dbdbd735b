"""Whole DAG runs whose evaluations decide the export: the best committed checkpoint
of a non-monotonic run, and a gate on accuracy that stops a run whose reward rose.

Without export_checkpoint and gate_metrics, the newest committed step (50, not 40) would be
exported, and a gate on mean_reward alone would let the second run export a model whose
accuracy fell.
"""

from __future__ import annotations

import json
from typing import Any

from sandbox.harness import SETTINGS, RunResult, Sandbox, Workloads
from sandbox.workloads import EvalResult

BUCKET = SETTINGS["gcs_bucket"]
# A checkpoint and an evaluation every 10 steps over 50 (rl.yml's eval_interval is 10), best of
# the committed ones exported.
BEST_CONF = {**SETTINGS, "checkpoint_period": 10, "export_checkpoint": "best"}
# Non-monotonic: step 20 scores best but its save is cut; 10 and 40 tie among the committed
# ones (the later wins); the last step (Post, 0.1234) is below both.
EVALS = {
    10: EvalResult(corr=10, mean_reward=0.25),
    20: EvalResult(corr=14, mean_reward=0.31),
    30: EvalResult(corr=11, mean_reward=0.20),
    40: EvalResult(corr=13, mean_reward=0.25),
}


def test_best_exports_the_argmax_over_the_committed_steps(airflow_db, tmp_path):
    with Sandbox(tmp_path).up() as box:
        result = box.run(BEST_CONF, Workloads(train_evals=EVALS, train_save_cuts={20: 3}))
        report = _run_report(box, result)
    assert result.state == "success", result.why()
    rewards = result.xcoms["wait_for_rewards.return_value"]
    assert [line["step"] for line in rewards["intermediate"]] == [10, 20, 30, 40]
    assert [line["kind"] for line in rewards["evaluations"]] == [
        "pre",
        *["intermediate"] * 4,
        "post",
    ]
    exported = result.xcoms["export.return_value"]
    assert exported["step"] == 40 and exported["choice"] == "best", exported
    assert exported["metrics"]["mean_reward"] == 0.25 and exported["final_step"] == 50
    assert exported["checkpoint_uri"].endswith("/checkpoints/actor/40/"), exported
    assert result.xcoms["export.checkpoint_step"] == 40
    gate = result.xcoms["gate.return_value"]
    assert gate["candidate"] == "step-40" and gate["post_mean_reward"] == 0.25, gate
    assert gate["metrics"]["accuracy"]["candidate"] == 13 / 64 * 100, gate
    # the report's table: a row per evaluated step, the exported one marked
    rows = {row["step"]: row for row in report["evaluations"]}
    assert sorted(rows) == [0, 10, 20, 30, 40, 50], rows
    assert [step for step, row in rows.items() if row["chosen"]] == [40]


def test_a_gate_on_accuracy_stops_a_run_whose_reward_rose_while_accuracy_fell(airflow_db, tmp_path):
    """Post: mean_reward 0.0821 -> 0.2 (the default gate would pass), accuracy 12.5 -> 9.375 %
    while format accuracy rose: `gate_metrics` with accuracy 0 stops it before export."""
    post = EvalResult(corr=6, format_accuracy=96.875, mean_reward=0.2)
    conf = {**SETTINGS, "gate_metrics": {"accuracy": 0, "mean_reward": 0.01}}
    with Sandbox(tmp_path).up() as box:
        result = box.run(conf, Workloads(post=post))
    assert result.state == "failed", result.task_states
    assert result.task_states["gate"] == "failed", result.task_states
    assert result.task_states["export"] == "upstream_failed", result.task_states
    assert "export.return_value" not in result.xcoms
    reason = result.xcoms["gate.failure"]
    assert "post-training accuracy=9.375 is below pre-training accuracy=12.5 + 0" in reason
    assert "format_accuracy 85.9375 -> 96.875" in reason, reason
    assert "mean_reward" not in reason.split("(")[0], reason  # it passed: not named as short
    assert result.task_states["cleanup_cluster"] == "success" and result.leftovers == []
    assert (Workloads().pre or post).mean_reward < post.mean_reward  # the reward rose


def _run_report(box: Sandbox, result: RunResult) -> dict[str, Any]:
    from tpu_rl.layout import run_slug

    identity = result.xcoms["validate.return_value"]["deployment_id"]  # the run's own
    slug = run_slug(result.run_id, identity)
    uri = f"gs://{BUCKET}/gemma4-26b/hf-trained/{slug}/run-report.json"
    return json.loads(box.gcs.read(uri))
