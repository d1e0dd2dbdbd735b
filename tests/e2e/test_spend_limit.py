"""The spend limit end to end: validate refuses a run whose estimate passes
max_spend_usd before anything is made; a run whose steps go slower than the estimate assumed
stops right after the first save committed once its projected spend passes the limit, then
exports that step (spend_limit_action=export) or fails (fail), with nothing left behind.

The sandbox runs 1000 times faster than real time (sandbox.run's time_scale) and its objects and
log lines carry wall-clock times, so the training's spend the reward wait measures is the
compressed run's. The mid-run scenarios therefore estimate the run on the same compressed clock
(`compressed_estimate`): the estimate's assumed durations scaled by the time scale, so the
estimate and the spend measured while training are of the same run, as in production.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from unittest import mock

from sandbox.harness import SPOT, Workloads
from sandbox.training_curve import TrainingFaults
from tpu_rl.report import estimate
from tpu_rl.settings.run_settings import load_settings

TIME_SCALE = 0.001  # sandbox.run's default: wall seconds per simulated second
# 60 steps, a save every 10; from step 15 each step takes 8 times as long as the estimate
# assumes: the projected spend passes a limit 30% above the estimate at about step 20
RUN = {**SPOT, "num_batches": 60, "checkpoint_period": 10}
SLOW = TrainingFaults(slow_from_step=15, slow_factor=8.0)
HEADROOM = 1.3


@contextlib.contextmanager
def compressed_estimate(scale: float = TIME_SCALE) -> Iterator[None]:
    """The estimate's assumed durations (tpu_rl.report.estimate) on the sandbox's clock."""
    minutes = {step: m * scale for step, m in estimate.ASSUMED_MINUTES.items()}
    with (
        mock.patch.dict(estimate.ASSUMED_MINUTES, minutes),
        mock.patch.object(estimate, "ASSUMED_STEP_SECONDS", estimate.ASSUMED_STEP_SECONDS * scale),
        mock.patch.object(
            estimate, "SCALE_DOWN_TAIL_MINUTES", estimate.SCALE_DOWN_TAIL_MINUTES * scale
        ),
    ):
        yield


def estimated_usd(conf: dict) -> float:
    """The run's estimate in its own capacity mode and region (what validate compares)."""
    settings = load_settings(conf)
    own = estimate.mode_in(estimate.estimate_run(settings), settings.capacity, settings.zone)
    assert own is not None and own.usd, own
    return own.usd


def _spend_event(result) -> dict:
    ends = [e for e in result.trigger_events if e.get("reason") == "spend_limit"]
    assert ends, result.why()
    return ends[0]


def _stopped_mid_run(result) -> int:
    """The save training stopped at: committed, before the last step, the newest save made."""
    event = _spend_event(result)
    step = event["save_step"]
    assert 10 <= step < RUN["num_batches"] and step % RUN["checkpoint_period"] == 0, event
    assert max(c.step for c in result.ledger.checkpoints) == step  # no save after it
    assert "training stopped right after the committed save of step" in event["message"]
    return step


def test_validate_refuses_a_run_whose_estimate_passes_the_limit_before_any_cluster(sandbox, capfd):
    limit = round(estimated_usd(RUN) / 2, 2)  # the real estimate: hours of TPUs
    result = sandbox.run({**RUN, "max_spend_usd": limit}, Workloads())
    assert result.state == "failed"
    assert result.task_states["validate"] == "failed", result.task_states
    assert result.clusters == {}  # no cluster made: nothing billed
    # nothing before the refusal: no gcluster or terraform call, no Kubernetes or GKE request
    assert result.calls == [] and result.emu.requests == [] and result.gke_lookups == 0
    assert not result.ledger.attempts
    out = capfd.readouterr().out
    assert "max_spend_usd: the run's estimate is $" in out
    assert f"over the limit of ${limit:,.2f}" in out
    assert result.leftovers == []


def test_the_spend_limit_stops_training_after_a_save_and_exports_it(sandbox, capfd):
    with compressed_estimate():
        limit = round(estimated_usd(RUN) * HEADROOM, 4)
        conf = {**RUN, "max_spend_usd": limit, "spend_limit_action": "export"}
        result = sandbox.run(conf, Workloads(train_faults=SLOW), time_scale=TIME_SCALE)
    assert result.state == "success", result.why()
    step = _stopped_mid_run(result)
    assert result.xcoms.get("export.checkpoint_step") == step
    stop = result.xcoms["wait_for_rewards.return_value"]["spend_stop"]
    assert f"passes max_spend_usd ${limit:,.2f}" in stop["message"]
    assert f"save of step {step}, which is exported" in stop["message"]
    out = capfd.readouterr().out
    assert re.search(rf"Projected spend \$[\d.]+ passes max_spend_usd \${limit:,.2f} at step", out)
    # the wait's log says so (dag.test: structlog to the output)
    assert f"save of step {step}, which is exported (spend_limit_action=export)" in out
    assert result.leftovers == []


def test_the_spend_limit_with_fail_stops_training_after_a_save_and_fails(sandbox):
    with compressed_estimate():
        limit = round(estimated_usd(RUN) * HEADROOM, 4)
        conf = {**RUN, "max_spend_usd": limit, "spend_limit_action": "fail"}
        result = sandbox.run(conf, Workloads(train_faults=SLOW), time_scale=TIME_SCALE)
    assert result.state == "failed", result.why()
    step = _stopped_mid_run(result)
    assert result.task_states["wait_for_rewards"] == "failed"
    message = _spend_event(result)["message"]
    assert f"save of step {step}, which is not exported: the run fails" in message
    assert result.task_states["export"] != "success"
    assert "export.checkpoint_step" not in result.xcoms
    assert result.leftovers == []
