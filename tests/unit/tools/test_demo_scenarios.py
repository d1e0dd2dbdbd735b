"""The watchdog in the demos: `make demo SCENARIO=<name>` and `make demo-ui
SCENARIO=<name>` name their fault, and every message that ends the wait ends with what to do
next, whole in the first line a note or a notice shows."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tools.demo import summary
from tools.demo_scenarios import SCENARIOS, chosen
from tpu_rl.report.failures import FIRST_LINE_CHARS, first_line
from tpu_rl.watch import health

KEPT = "the healthy checkpoint is step 40: gs://" + "b" * 60 + "/checkpoints/actor/40/"
STALL_WHY = (
    "no Train step line for 1800s after step 44, over the stall limit 1800s "
    "(health_stall_factor 5x the median step interval, at least health_stall_floor_minutes) "
    "while the training pod runs"
)


def anomaly(rule: str, why: str = "loss nan at step 35") -> dict:
    evidence = ["I1206 13:01:02.707281 1400 peft_trainer.py:735] Train step 35 training loss: nan"]
    return {"rule": rule, "step": 35, "anomaly_step": 34, "why": why, "evidence": evidence * 3}


def test_an_unknown_scenario_is_refused_with_the_known_ones():
    assert chosen(None) is None and chosen("") is None
    assert chosen("nan") is SCENARIOS["nan"]
    assert chosen("heldout_guard_fell") is SCENARIOS["heldout_guard_fell"]
    known = "nan, nan-export, stall, collapse, heldout_guard_fell"
    with pytest.raises(ValueError, match=f"SCENARIO=nans is unknown; known: {known}$"):
        chosen("nans")


@pytest.mark.parametrize("rule", sorted(health.NEXT_STEPS))
def test_each_rules_failure_ends_its_first_line_with_what_to_do_next(rule):
    found = {**anomaly(rule, STALL_WHY), "action": "stop"}
    text = health.failure_text(found, KEPT)
    first = text.splitlines()[0]
    assert first.startswith(f"Training health: {rule} at step 35 (health_action=stop): ")
    assert first.endswith(health.next_step(found)) and health.next_step(found).startswith("Next: ")
    assert len(first) <= FIRST_LINE_CHARS and first_line(text) == first
    assert text.splitlines()[1:] == [
        f"No checkpoint from step 34 on is used; {KEPT}.",
        f"Evidence: {'; '.join(found['evidence'])}",
    ]


def test_the_demos_summary_shows_the_watchdogs_stop_once_ending_with_the_next_step():
    found = {**anomaly(health.NONFINITE), "action": "stop", "healthy_checkpoint": "gs://b/30/"}
    result = SimpleNamespace(
        state="failed",
        task_states={"wait_for_rewards": "failed", "outcome": "failed"},
        xcoms={
            "wait_for_rewards.failure": health.failure_text(found, KEPT).splitlines()[0],
            "wait_for_rewards.anomaly": found,
        },
        calls=[],
        leftovers=[],
    )
    lines = summary(result, {}, 30.0, "none (no export)", ["wait_for_rewards", "outcome"])
    assert not [line for line in lines if line.startswith("error:")], lines
    assert lines[1:4] == [
        "watchdog: nonfinite_loss at step 35 (health_action=stop): loss nan at step 35",
        "          no checkpoint from step 34 on is used; healthy: gs://b/30/",
        f"          {health.next_step(found)}",
    ]
