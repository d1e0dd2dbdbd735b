"""Champion against challenger in whole sandbox runs: a challenger that beats
its own base but loses to the deployment's champion is exported and not promoted, the run
saying why; a deployment's first run has no champion to beat."""

from __future__ import annotations

import json
import logging

from sandbox.champion_eval import seed_champion
from sandbox.harness import SETTINGS, Sandbox, Workloads, logged_note
from sandbox.workloads import EvalResult
from tpu_rl.layout import run_slug

DEPLOYMENT = "champ-e2e"
CHAMPION_SCORES = EvalResult(
    corr=14, partial_accuracy=25.0, format_accuracy=92.1875, mean_reward=0.2
)
BUCKET = SETTINGS["gcs_bucket"]
ROOT = f"gs://{BUCKET}/gemma4-26b"
RECORD_URI = f"{ROOT}/champions/{DEPLOYMENT}.json"


def test_a_challenger_that_beats_its_base_but_loses_to_the_champion_is_not_promoted(
    airflow_db, tmp_path
):
    with Sandbox(tmp_path).up(env={"TPU_RL_DEPLOYMENT_ID": DEPLOYMENT}) as box:
        seeded = seed_champion(box.gcs, BUCKET, DEPLOYMENT, CHAMPION_SCORES)
        before = box.gcs.read(RECORD_URI)
        # the default workloads: mean_reward 0.0821 before training, 0.1234 after
        result = box.run(SETTINGS, Workloads(champion=CHAMPION_SCORES))
        after = box.gcs.read(RECORD_URI)
        report = json.loads(box.gcs.read(f"{ROOT}/hf-trained/{_slug(result)}/run-report.json"))
        # no training step: the evaluation saved no checkpoint of its own
        evaluation_dir = f"gemma4-26b/trained/{_slug(result)}-champion/checkpoints/"
        assert box.gcs.names(BUCKET, evaluation_dir) == []
    states, xcoms = result.task_states, result.xcoms
    assert result.state == "success", states
    assert {states[t] for t in ("gate", "export", "verify", "evaluate_champion")} == {"success"}
    assert xcoms["gate.return_value"]["gain"] > 0  # it beat its own base
    # the champion, scored on this run's backend: its Pre line, its checkpoint loaded
    scored = xcoms["evaluate_champion.metrics"]
    assert scored["mean_reward"] == 0.2 and scored["corr"] == 14
    assert xcoms["evaluate_champion.champion"]["checkpoint_uri"] == seeded["checkpoint_uri"]
    # (the fake client read <load_parameters_path>/_METADATA as its pod: only the step's
    # model_params/ has one, so the record's step folder was loaded as its parameters)
    compare = xcoms["compare_champion.return_value"]
    assert compare["beats"] is False
    assert compare["reason"] == (
        f"not promoted: loses to the champion from run {seeded['run_id']}: "
        "mean_reward 0.1234 vs champion 0.2 (needs +0)"
    )
    # the record as parsed (a record written before registry_version existed has none)
    assert compare["champion"] == {**seeded, "registry_version": None}
    assert compare["champion_metrics"] == scored
    # the generation it compared with, which promote would replace (GCS's, never 0 once written)
    assert compare["champion_generation"] == xcoms["evaluate_champion.champion_generation"] > 0
    assert compare["challenger_metrics"]["mean_reward"] == 0.1234
    assert after == before  # no champion record written
    # the run succeeded, saying why nothing was promoted
    assert states["compare_champion"] == "success" and states["outcome"] == "success"
    assert xcoms["outcome.return_value"]["champion"] == compare["reason"]
    assert report["champion"]["reason"] == compare["reason"]
    # the backend was kept for the evaluation, then stop_backend deleted it
    assert xcoms["stop_backend.return_value"] is True
    assert result.leftovers == []


def test_a_deployments_first_run_has_no_champion_and_says_so(airflow_db, tmp_path):
    with Sandbox(tmp_path).up(env={"TPU_RL_DEPLOYMENT_ID": DEPLOYMENT}) as box:
        result = box.run(SETTINGS, Workloads())
    states, xcoms = result.task_states, result.xcoms
    assert result.state == "success", states
    assert states["evaluate_champion"] == "skipped" and states["stop_backend"] == "success"
    compare = xcoms["compare_champion.return_value"]
    assert compare["beats"] is True
    assert compare["reason"] == "no champion yet: this run's export becomes the first candidate"
    assert compare["champion"] is None and compare["champion_metrics"] is None
    assert compare["champion_generation"] == 0  # promote: the record must still not exist
    # no champion: the wait released the backend the moment it ended
    assert xcoms["stop_backend.return_value"] is False
    assert xcoms["outcome.return_value"]["champion"] == compare["reason"]
    assert result.leftovers == []


def _slug(result) -> str:
    return run_slug(result.run_id, DEPLOYMENT)


def test_a_corrupt_champion_record_fails_the_run_naming_the_record_and_the_fix(
    airflow_db, tmp_path, caplog
):
    """A record that is not one (here cut mid-write) fails evaluate_champion
    in one line naming its gs:// path, what is wrong and how to fix it; the note leads with it."""
    caplog.set_level(logging.INFO, logger="tpu_rl")
    with Sandbox(tmp_path).up(env={"TPU_RL_DEPLOYMENT_ID": DEPLOYMENT}) as box:
        seed_champion(box.gcs, BUCKET, DEPLOYMENT, CHAMPION_SCORES)
        box.gcs.write(RECORD_URI, b'{"run_id": "scheduled__2026-11-26T00:00:00+00:00", "expo')
        result = box.run(SETTINGS, Workloads())
        after = box.gcs.read(RECORD_URI)
    states = result.task_states
    assert result.state == "failed", result.why()
    assert states["evaluate_champion"] == "failed" and states["verify"] == "success", states
    assert states["promote"] == "upstream_failed" and result.leftovers == []
    assert after.startswith(b'{"run_id"')  # left as it was
    note = logged_note(caplog.records)
    verdict = note.split("\n\n")[0]
    assert verdict.startswith(
        f"**failed: evaluate_champion: champion record {RECORD_URI} (generation "
    ), note
    assert "is not one: not JSON (" in verdict
    assert f"Delete it (`gcloud storage rm {RECORD_URI}`" in verdict, note
    assert f"restore an earlier generation (`gcloud storage ls -a {RECORD_URI}`" in verdict, note
