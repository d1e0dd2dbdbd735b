"""The training watchdog judged on real GRPO runs: the corpus `make corpus` recorded
from Tunix's real trainer (sandbox/corpus, sandbox/trainer_corpus.py), replayed through the
follower and the watchdog at the run settings' defaults. No run without a fault is stopped;
each real fault is caught by its rule, before any checkpoint it poisoned could be chosen.

Without health_spike_floor the older rules stop 10 of the 13 runs without a fault (loss_spike
on GRPO's near-zero, sign-changing loss; kl_blowup on a policy that learned;
reward_std_collapse on a saturated reward)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from sandbox.trainer_corpus import CorpusRun, default_rules, runs, shows_at, watch
from tpu_rl.watch import health

pytestmark = pytest.mark.unit

CORPUS = runs()
HEALTHY = [r for r in CORPUS if r.fault is None]
FAULTS = [r for r in CORPUS if r.fault is not None]
# the rule that must catch each real fault
CAUGHT_BY = {
    "lr_collapse": health.SPIKE,
    "overflow": health.NONFINITE,
    "stall": health.STALL,
    "kl_blowup": health.KL_BLOWUP,
}


def test_the_corpus_spans_the_shapes_and_faults_the_issue_names():
    assert len(HEALTHY) >= 10
    assert {r.settings["beta"] for r in HEALTHY} >= {0.0, 0.04, 0.1}
    assert len({r.settings["num-generations"] for r in HEALTHY}) >= 3
    assert len({r.settings["learning-rate"] for r in HEALTHY}) >= 3
    assert len({r.settings.get("num-layers", 1) for r in HEALTHY}) >= 3
    assert len({r.settings.get("max-tokens", 10) for r in HEALTHY}) >= 3
    assert {r.fault["kind"] for r in FAULTS} == set(CAUGHT_BY)
    for run in CORPUS:  # each file says how it was made
        assert run.command.startswith("make corpus"), run.name
        assert run.versions["google-tunix"] and run.versions["jax"], run.name


def test_real_grpo_losses_are_near_zero_and_change_sign():
    """What the old loss_spike rule did not know: the loss is ~beta*KL plus a zero-mean term."""
    for run in HEALTHY:
        assert max(abs(x) for x in run.losses()) < 1.0, run.name
    changing_sign = [r.name for r in HEALTHY if min(r.losses()) < 0 < max(r.losses())]
    assert len(changing_sign) >= len(HEALTHY) - 3, changing_sign


@pytest.mark.parametrize("run", HEALTHY, ids=lambda r: r.name)
def test_no_run_without_a_fault_is_stopped_at_the_defaults(run: CorpusRun):
    verdict = watch(run, default_rules())
    assert verdict.anomaly is None, (run.name, verdict.anomaly)


@pytest.mark.parametrize("run", FAULTS, ids=lambda r: r.name)
def test_each_real_fault_is_caught_by_its_rule(run: CorpusRun):
    verdict = watch(run, default_rules())
    assert verdict.rule == CAUGHT_BY[run.fault["kind"]], (run.name, verdict.anomaly)
    # caught as soon as the output shows it (the KL rule: within a log_period's flush), and
    # no checkpoint from the step the fault shows at is trusted
    assert verdict.anomaly["step"] <= shows_at(run), verdict.anomaly
    assert verdict.anomaly["anomaly_step"] <= shows_at(run), verdict.anomaly


def test_the_overflow_is_judged_at_its_first_nan_line():
    run = next(r for r in FAULTS if r.fault["kind"] == "overflow")
    first_nan = next(
        int(line.split("Train step ")[1].split()[0])
        for line in run.log
        if "training loss: nan" in line
    )
    verdict = watch(run, default_rules())
    assert verdict.anomaly["step"] == first_nan == run.fault["step"]
    assert not math.isfinite(run.losses()[first_nan - 1])


def test_the_old_rules_stopped_healthy_runs():
    """The regression this corpus guards: the rules without health_spike_floor (a spike
    relative to the median only, KL without the reward, any flat batch) stop healthy runs."""
    old = dataclasses.replace(default_rules(), spike_floor=0.0)
    stopped = [r.name for r in HEALTHY if watch(r, old).rule == health.SPIKE]
    assert stopped, "a spike rule without its floor no longer stops any healthy run"
