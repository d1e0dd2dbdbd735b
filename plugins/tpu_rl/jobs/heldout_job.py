"""The held-out evaluation Job: MaxText's evaluator (`python -m maxtext.eval.runner.run --runner
lm_eval`, MaxText 0.2.4, docs/maxtext_eval.md) on every host of the slice, once per model, each
model's lm-eval samples kept beside MaxText's results.

MaxText's lm_eval runner calls `lm_eval.simple_evaluate` with `log_samples` False
(maxtext/eval/runner/harness_runner.py:184) and writes lm-eval's `config`, whose `model_args`
hold `token=<the Hugging Face token>` (harness_runner.py:167-169), into its results JSON
(json_reporter.py:58-65). So each model's command runs the evaluator through SAMPLES_KEEPER: it
replaces `lm_eval.simple_evaluate` (looked up at call time: harness_runner.py:194) with one that
logs the samples, writes each task's per-item records to the model's folder, drops them from
what MaxText writes, and masks the token there. No other way exists: the runner has no flag for
either (harness_runner.py:225-285)."""

from __future__ import annotations

import shlex
from typing import NamedTuple

from tpu_rl.jobs.manifests import Manifest, slice_job
from tpu_rl.jobs.maxtext_flags import flag
from tpu_rl.layout import RunLayout

SAMPLES_ENV = "TPU_RL_SAMPLES_URI"  # gs://.../heldout/<label>/: where a model's samples go
SAMPLES_FILE = "samples_{task}.json"  # one per lm-eval task, in the model's folder
# Runs in the MaxText image (Python 3.12, lm-eval and google-cloud-storage installed); every host
# runs it, rank 0 alone evaluates (harness_runner.py:151-204): the others never call lm-eval.
SAMPLES_PATCH = """
import json, os, re, sys
import lm_eval
from google.cloud import storage

OUT = os.environ["TPU_RL_SAMPLES_URI"]
KEYS = ("doc_id", "doc_hash", "filter")
evaluate = lm_eval.simple_evaluate


def kept(record):
    row = {key: record[key] for key in KEYS if key in record}
    row.update({name: record[name] for name in record.get("metrics", ()) if name in record})
    return row


def simple_evaluate(*args, **kwargs):
    kwargs["log_samples"] = True
    raw = evaluate(*args, **kwargs)
    bucket, _, folder = OUT.removeprefix("gs://").partition("/")
    client = storage.Client()
    for task, records in (raw.pop("samples", None) or {}).items():
        blob = client.bucket(bucket).blob(folder + "samples_" + task + ".json")
        blob.upload_from_string(json.dumps([kept(r) for r in records]), "application/json")
    config = raw.get("config") or {}
    if isinstance(config.get("model_args"), str):
        config["model_args"] = re.sub("token=[^,]*", "token=<masked>", config["model_args"])
    return raw


lm_eval.simple_evaluate = simple_evaluate
"""
RUN_EVALUATOR = """
from maxtext.eval.runner.run import main

sys.argv = ["maxtext.eval.runner.run", *sys.argv[1:]]
main()
"""
SAMPLES_KEEPER = SAMPLES_PATCH + RUN_EVALUATOR


class HeldoutModel(NamedTuple):
    """A model the evaluation scores: its label (`step-30`, `base`, `champion`: its folder and
    MaxText run_name) and its MaxText checkpoint (an Orbax parameters folder)."""

    label: str
    checkpoint: str


def heldout_tasks(layout: RunLayout) -> list[str]:
    """The benchmarks scored, guards last."""
    s = layout.settings
    return [*s.heldout_tasks, *s.heldout_guard_tasks]


def evaluator_flags(layout: RunLayout, model: HeldoutModel) -> list[str]:
    """maxtext.eval's lm_eval flags for one model (runner/common.py:106-150,
    harness_runner.py:225-285); the token comes from HF_TOKEN (common.py:27-29), never a flag."""
    s = layout.settings
    samples = [flag("--num_samples", s.heldout_num_samples)] if s.heldout_num_samples else []
    return [
        "--runner=lm_eval",
        flag("--checkpoint_path", model.checkpoint),
        flag("--model_name", s.model_name),
        flag("--hf_path", s.hf_model_path),
        "--tasks",
        *heldout_tasks(layout),
        flag("--base_output_directory", layout.heldout_dir),
        flag("--run_name", model.label),
        flag("--max_model_len", s.max_prefill_predict_length + s.max_target_length),
        flag("--tensor_parallel_size", s.chips),
        *samples,
    ]


def evaluator_command(layout: RunLayout, model: HeldoutModel) -> str:
    """One model's shell line: the evaluator through SAMPLES_KEEPER."""
    words = " ".join(shlex.quote(f) for f in evaluator_flags(layout, model))
    samples = shlex.quote(layout.heldout_samples_dir(model.label))
    return f"{SAMPLES_ENV}={samples} python3 -c {shlex.quote(SAMPLES_KEEPER)} {words}"


def heldout_evaluation_job(layout: RunLayout, models: list[HeldoutModel]) -> Manifest:
    """The Job scoring `models` one after the other on every host of the slice."""
    script = " && ".join(evaluator_command(layout, model) for model in models)
    minutes = layout.settings.heldout_timeout_minutes * len(models)
    return slice_job(layout, layout.job_names["heldout"], script, minutes)
