"""The training health watchdog in the demos: `make demo SCENARIO=<name>` and `make demo-ui
SCENARIO=<name>` train in the sandbox with one fault (sandbox.training_curve.TrainingFaults) that
the watchdog (tpu_rl.watch.health) stops end to end: the training Job and the backend deleted
within a poll, the run's failure (or its export of the newest healthy checkpoint) naming the
rule, the step, the evidence and what to do next. Faults and settings as tests/unit/watch/
test_health.py replays them and tests/e2e/test_training_health.py runs some whole; the stall's
floor is scaled to the sandbox's compressed time. One more, `heldout_guard_fell`, trains healthy
and is held by the held-out evaluation's guard (tests/e2e/test_heldout.py's last run): the run
asks a person under Required Actions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sandbox.heldout_eval import HeldoutWorkload
from sandbox.training_curve import TrainingFaults
from sandbox.workloads import EvalResult

NAN_AT, STALL_AT, COLLAPSE_AT = 35, 45, 30  # COLLAPSE_AT: an Intermediate Eval's step
# a save every 10 steps: the newest healthy checkpoint is the one before the fault
SAVES = {"checkpoint_period": 10}


@dataclass(frozen=True)
class Scenario:
    """One fault the watchdog stops, with the settings that show it."""

    what: str  # the terminal's line: the fault and what the watchdog does
    settings: dict[str, Any]  # over the demo's own
    faults: TrainingFaults
    # the sandbox.harness.Workloads fields it sets beside the faults: the collapse's evaluations
    # score as GSM8K's mean_reward can (rewards of up to 3 each summed), so a fall of 1.5 passes
    # health_reward_drop (1.0)
    workloads: dict[str, Any] = field(default_factory=dict)


SCENARIOS = {
    "nan": Scenario(
        f"the loss turns nan at step {NAN_AT}: the watchdog stops training, the run fails",
        {**SAVES, "health_action": "stop"},
        TrainingFaults(nan_at_step=NAN_AT),
    ),
    "nan-export": Scenario(
        f"the loss turns nan at step {NAN_AT}; health_action=export_healthy: the run exports "
        "the newest checkpoint before it",
        {**SAVES, "health_action": "export_healthy", "min_reward_gain": -100.0},
        TrainingFaults(nan_at_step=NAN_AT),
    ),
    "stall": Scenario(
        f"step {STALL_AT} never ends, the pod running and silent: the watchdog stops it after "
        "health_stall_floor_minutes (0.1 here: the sandbox's steps take a fraction of a second)",
        {**SAVES, "health_stall_floor_minutes": 0.1},
        TrainingFaults(stall_at_step=STALL_AT),
    ),
    "collapse": Scenario(
        f"the mean reward falls by 1.5 at the evaluation of step {COLLAPSE_AT}: the watchdog "
        "stops training, the run fails",
        SAVES,
        TrainingFaults(reward_collapse_at_eval=COLLAPSE_AT, reward_collapse_by=1.5),
        {
            "pre": EvalResult(corr=8, mean_reward=0.5),
            "post": EvalResult(corr=12, mean_reward=2.5),
            "train_evals": {},  # each evaluation reports `post` until the collapse
        },
    ),
    # tests/e2e/test_heldout.py's last run: training is healthy; the held-out evaluation scores
    # steps 30 and 40 at 85% of GSM8K (the base 70%) but 55% of the guard ARC-Easy (the base
    # 75%), so approve asks a person even with approval=none (Required Actions, the table in it)
    "heldout_guard_fell": Scenario(
        "the held-out evaluation scores GSM8K and a guard, ARC-Easy, that the run lost: "
        "promotion waits for a person",
        {
            "num_batches": 40,
            **SAVES,
            "approval": "none",
            "heldout_tasks": ["gsm8k"],
            "heldout_guard_tasks": ["arc_easy"],
            "heldout_top_k": 2,
        },
        TrainingFaults(),
        {
            "heldout": HeldoutWorkload(
                base={"gsm8k": 0.70, "arc_easy": 0.75}, steps={"gsm8k": 0.85, "arc_easy": 0.55}
            )
        },
    ),
}


def chosen(name: str | None) -> Scenario | None:
    """The scenario `name` names (None: the healthy run); ValueError naming the known ones."""
    if not name:
        return None
    if name not in SCENARIOS:
        raise ValueError(f"SCENARIO={name} is unknown; known: {', '.join(SCENARIOS)}")
    return SCENARIOS[name]
