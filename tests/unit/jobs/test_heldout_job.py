"""The held-out evaluation Job: MaxText's evaluator on every host, once per model, the token
from the run's Secret only; and its samples keeper run with lm-eval's own code."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from tests.support.scripted_lm import CANDIDATE_RIGHT, CANDIDATE_UNMARKED, ScriptedModel, evaluate
from tpu_rl.heldout.samples import item_results, reported_metric
from tpu_rl.jobs import heldout_job
from tpu_rl.jobs.heldout_job import HeldoutModel, evaluator_flags, heldout_evaluation_job
from tpu_rl.layout import RunLayout
from tpu_rl.settings.run_settings import load_settings

TOKEN = "hf_RealSecretToken0123456789"


@pytest.fixture
def layout(tutorial_conf: dict[str, Any]) -> RunLayout:
    conf = {**tutorial_conf, "heldout_tasks": ["gsm8k"], "heldout_guard_tasks": ["arc_easy"]}
    return RunLayout(load_settings(conf), "manual__h", "test-deployment")


def models(layout: RunLayout) -> list[HeldoutModel]:
    return [
        HeldoutModel("step-40", layout.checkpoint_params(40)),
        HeldoutModel("base", layout.maxtext_items),
    ]


def test_every_host_runs_the_evaluator_for_each_model_in_turn(layout):
    job = heldout_evaluation_job(layout, models(layout))
    spec = job["spec"]
    hosts = layout.pool_hosts
    assert (spec["parallelism"], spec["completions"], spec["completionMode"]) == (
        hosts,
        hosts,
        "Indexed",
    )
    s = layout.settings
    assert (
        spec["activeDeadlineSeconds"]
        == (s.pending_timeout_minutes + 2 * s.heldout_timeout_minutes) * 60
    )
    [container] = spec["template"]["spec"]["containers"]
    script = container["command"][2]
    assert "JOB_COMPLETION_INDEX" not in script  # multi-host vLLM: every host takes part
    lines = script.split(" && ")
    assert len(lines) == 2
    first = shlex.split(lines[0])
    assert first[0] == f"TPU_RL_SAMPLES_URI={layout.heldout_dir}step-40/"
    assert first[1:4] == ["python3", "-c", heldout_job.SAMPLES_KEEPER]
    assert first[4:] == evaluator_flags(layout, models(layout)[0])
    tasks = first.index("--tasks")
    assert first[tasks + 1 : tasks + 3] == ["gsm8k", "arc_easy"]
    # the token reaches the evaluator as HF_TOKEN (maxtext/eval/runner/common.py:27-29)
    [env] = container["env"]
    assert env["name"] == "HF_TOKEN" and env["valueFrom"]["secretKeyRef"]["name"]
    assert "token" not in " ".join(first[4:]).lower()


def test_a_step_and_the_base_are_loaded_from_their_orbax_folders(layout):
    step, base = (evaluator_flags(layout, m) for m in models(layout))
    assert f"--checkpoint_path={layout.checkpoint_params(40)}" in step
    assert f"--checkpoint_path={layout.maxtext_items}" in base
    assert "--run_name=base" in base and "--runner=lm_eval" in base


class Bucket:
    """google-cloud-storage's Client, as far as the keeper uses it: uploads kept by name."""

    objects: dict[str, str] = {}

    def bucket(self, name: str) -> Any:
        objects = self.objects

        class Blob:
            def __init__(self, path: str) -> None:
                self.uri = f"gs://{name}/{path}"

            def upload_from_string(self, data: str, content_type: str) -> None:
                objects[self.uri] = data

        class Named:
            def blob(self, path: str) -> Blob:
                return Blob(path)

        return Named()


def test_the_keeper_writes_lm_evals_samples_and_masks_the_token(monkeypatch, tmp_path: Path):
    """SAMPLES_PATCH run for real over lm-eval 0.4.13's simple_evaluate (a scripted model on
    the shipped task): each item's result as lm-eval scored it, and no token in its config."""
    import lm_eval
    from google.cloud import storage

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TPU_RL_SAMPLES_URI", "gs://bucket/run/heldout/step-40/")
    monkeypatch.setattr(lm_eval, "simple_evaluate", lm_eval.simple_evaluate)  # restored after
    monkeypatch.setattr(storage, "Client", Bucket)
    Bucket.objects = {}
    exec(heldout_job.SAMPLES_PATCH, {})  # the pod's own script, as the pod runs it
    model = ScriptedModel(CANDIDATE_RIGHT, CANDIDATE_UNMARKED)
    raw = evaluate(model, tmp_path, log_samples=False, model_args=f"base_url=x,token={TOKEN}")
    assert "samples" not in raw  # dropped from what MaxText writes
    assert raw["config"]["model_args"] == "base_url=x,token=<masked>"
    [(uri, data)] = Bucket.objects.items()
    assert uri == "gs://bucket/run/heldout/step-40/samples_depot_arithmetic.json"
    kept = json.loads(data)
    assert TOKEN not in data and "resps" not in kept[0]
    metric, filter_name = reported_metric(kept)
    assert (metric, filter_name) == ("exact_match", "strict-match")  # MaxText's gsm8k_accuracy
    items = item_results(kept, metric, filter_name)
    reported = raw["results"]["depot_arithmetic"]["exact_match,strict-match"]
    assert sum(items.values()) / len(items) == pytest.approx(reported)
