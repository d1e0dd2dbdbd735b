"""MaxText 0.2.4's own evaluator entry point judges the held-out Job's command line: for every
catalogue cell, `maxtext.eval.runner.run` (its --runner pre-parse, then harness_runner's parser)
takes the flags evaluator_flags gives and makes the configuration the evaluator runs with, the
results folder where the product and the sandbox read them included; a flag its lm_eval runner
lacks is refused with exit 2 (docs/maxtext_eval.md, section 1)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.maxtext.judging import JudgeMissing, judge_python
from tests.support.cells import cell_conf
from tpu_rl.catalogue.cells import CELLS
from tpu_rl.jobs.heldout_job import HeldoutModel, evaluator_flags
from tpu_rl.layout import RunLayout
from tpu_rl.settings.run_settings import load_settings

# harness_runner.main parses, then hands its configuration to run_harness
# (maxtext/eval/runner/harness_runner.py:288-300): the probe prints it instead of evaluating
PROBE = """
import json, sys
import maxtext.eval.runner.harness_runner as runner
runner.run_harness = lambda cfg, hf_token=None: print(json.dumps({"cfg": cfg, "token": hf_token}))
from maxtext.eval.runner.run import main
sys.argv = ["maxtext.eval.runner.run", *sys.argv[1:]]
main()
"""
HELDOUT = {
    "heldout_tasks": ["gsm8k"],
    "heldout_guard_tasks": ["arc_easy"],
    "heldout_num_samples": 250,
}


def maxtext_parses(flags: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        python = judge_python()
    except JudgeMissing as missing:
        pytest.fail(str(missing), pytrace=False)
    return subprocess.run(
        [str(python), "-c", PROBE, *flags], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: f"{c.model_name}@{c.tpu_type}")
def test_maxtexts_evaluator_takes_the_command_of_every_cell(cell: Any):
    layout = RunLayout(load_settings({**cell_conf(cell), **HELDOUT}), "manual__heldout", "dep")
    model = HeldoutModel("step-40", layout.checkpoint_params(40))
    done = maxtext_parses(evaluator_flags(layout, model))
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    cfg, s = found["cfg"], layout.settings
    assert cfg["checkpoint_path"] == layout.checkpoint_params(40)
    assert cfg["tasks"] == ["gsm8k", "arc_easy"] and cfg["num_samples"] == 250
    assert cfg["results_path"] == f"{layout.heldout_samples_dir('step-40')}eval_results"
    assert (cfg["model_name"], cfg["hf_path"]) == (s.model_name, s.hf_model_path)
    assert cfg["tensor_parallel_size"] == s.chips and cfg["backend"] == "lm_eval"
    assert found["token"] is None  # from HF_TOKEN in the pod (runner/common.py:27-29)


def test_a_flag_its_lm_eval_runner_lacks_is_refused(tutorial_conf: dict[str, Any]):
    layout = RunLayout(load_settings({**tutorial_conf, **HELDOUT}), "manual__heldout", "dep")
    flags = evaluator_flags(layout, HeldoutModel("base", layout.maxtext_items))
    done = maxtext_parses([*flags, "--temperature=0"])
    assert done.returncode == 2 and "unrecognized arguments: --temperature=0" in done.stderr
