"""Held-out evaluation in whole sandbox runs: MaxText's evaluator (the sandbox's, following
maxtext.eval's command line and files) scores the best committed steps, the base model and the
champion on the same items; the export takes the step that scored best, and the champion
comparison promotes only on a significant paired gain.

Without the held-out step the run exports the newest step (40). A candidate the held-out items
cannot tell from the champion is not promoted: tests/unit/promotion/test_comparison.py decides
it on the items, and test_champion.py's runs show a comparison that says no skipping promote.
A guard benchmark answered worse than the base model holds the run for a person:
test_reward_hacking_hold.py."""

from __future__ import annotations

import json

from sandbox.champion_eval import seed_champion
from sandbox.harness import HELDOUT, SETTINGS, Sandbox, Workloads
from sandbox.heldout_eval import HeldoutWorkload
from sandbox.workloads import EvalResult

DEPLOYMENT = "heldout-e2e"
BUCKET = SETTINGS["gcs_bucket"]
ROOT = f"gs://{BUCKET}/gemma4-26b"
# a weak champion on the trainer's numbers (the default run's post line has mean_reward 0.1234)
CHAMPION_SCORES = EvalResult(corr=6, mean_reward=0.05)
CONF = {**SETTINGS, **HELDOUT, "approval": "none"}


def run(tmp_path, heldout: HeldoutWorkload):
    """A run of CONF against a seeded champion; its result and the champion record after."""
    with Sandbox(tmp_path).up(env={"TPU_RL_DEPLOYMENT_ID": DEPLOYMENT}) as box:
        seed_champion(box.gcs, BUCKET, DEPLOYMENT, CHAMPION_SCORES)
        result = box.run(CONF, Workloads(champion=CHAMPION_SCORES, heldout=heldout))
        record = json.loads(box.gcs.read(f"{ROOT}/champions/{DEPLOYMENT}.json"))
        kept = box.gcs.names(BUCKET, "gemma4-26b/trained/")
    return result, record, kept


def test_the_best_heldout_step_is_exported_and_promoted_on_a_significant_gain(airflow_db, tmp_path):
    """Steps 30 and 40 are scored (the trainer ranks its evaluations alike: the newest two);
    step 30 answers 88% of GSM8K's 1,319 items, 40 80%, the champion 78%, the base 70%."""
    heldout = HeldoutWorkload(per_step={30: {"gsm8k": 0.88}})
    result, record, kept = run(tmp_path, heldout)
    states, xcoms = result.task_states, result.xcoms
    assert result.state == "success", states
    report = xcoms["evaluate_heldout.return_value"]
    assert report["step"] == 30 and set(report["step_scores"]) == {"30", "40"}
    gsm8k, arc = report["rows"]
    assert (gsm8k["task"], gsm8k["items"], arc["task"], arc["guard"]) == (
        "gsm8k",
        1319,
        "arc_easy",
        True,
    )
    assert abs(gsm8k["candidate"] - 0.88) < 0.03 and abs(gsm8k["champion"] - 0.78) < 0.03
    assert xcoms["gate.return_value"]["heldout"]["verdict"] == "better"
    assert xcoms["export.checkpoint_step"] == 30  # not the newest, 40
    assert xcoms["export.return_value"]["choice"] == "heldout"
    compare = xcoms["compare_champion.return_value"]
    assert compare["beats"] and compare["heldout_verdict"] == "better", compare["reason"]
    assert record["step"] == 30 and states["promote"] == "success"
    # each model's items kept in the run's folder, beside MaxText's results
    for label in ("step-30", "step-40", "base", "champion"):
        assert any(f"/heldout/{label}/samples_gsm8k.json" in name for name in kept), label
        assert any(f"/heldout/{label}/eval_results/" in name for name in kept), label
    assert result.leftovers == []


def test_an_evaluator_that_dies_fails_the_run_before_export_and_leaves_nothing_running(
    airflow_db, tmp_path
):
    """MaxText's evaluator dies on its first model (its vLLM server thread, exit 1): the run
    fails at evaluate_heldout, saying so; nothing is exported or promoted, and the cleanups
    remove the Job, the backend and the cluster's TPU pods as for any failure."""
    heldout = HeldoutWorkload(exit_code=1)
    with Sandbox(tmp_path).up() as box:
        result = box.run(CONF, Workloads(heldout=heldout))
    states = result.task_states
    assert result.state == "failed", states
    assert states["evaluate_heldout"] == "failed"
    assert states["gate"] == states["export"] == "upstream_failed"
    assert states["cleanup_kubernetes"] == states["cleanup_cluster"] == "success"
    assert result.leftovers == [], result.leftovers
    assert "evaluate_heldout" in result.why()
