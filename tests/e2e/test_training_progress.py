"""Training progress on the run's page and in its note while training runs:
the reward wait reports its step, ETA and spend every `progress_report_minutes` of training,
writes them to the run's summary and note, and defers again from the same log position and
watchdog memory, so the page and the note know the run's progress before the wait ends."""

from __future__ import annotations

import logging

from sandbox.harness import SETTINGS, Workloads, logged_note
from tpu_rl.watch.progress import PROGRESS_EVENT

# 100 steps of 60 simulated s (0.06 wall s here, line times are wall-clock): a report about
# every 1.2 s of the lines' time, several in a run
CONF = {**SETTINGS, "num_batches": 100, "checkpoint_period": 25, "progress_report_minutes": 0.02}


def test_progress_reaches_the_summary_and_the_note_while_training_runs(sandbox, caplog):
    caplog.set_level(logging.INFO, logger="tpu_rl")
    result = sandbox.run(CONF, Workloads(train_step_jitter=0.1))
    assert result.state == "success", result.why()
    reports = [e for e in result.trigger_events if e.get("reason") == PROGRESS_EVENT]
    assert len(reports) >= 2, result.trigger_events
    steps = [e["progress"]["step"] for e in reports]
    assert steps == sorted(steps) and len(set(steps)) == len(steps), steps  # each further on
    first = reports[0]["progress"]
    assert first["total_steps"] == 100 and first["steps_per_hour"] > 0 and first["eta"], first
    # the wait went on from each report's state: one attempt, every step once, all rewards
    assert result.ledger.steps_recomputed() == 0
    assert len(result.ledger.attempts) == 1
    assert result.xcoms["wait_for_rewards.return_value"]["post"]["mean_reward"] > 0
    summary = result.xcoms["wait_for_rewards.summary"]
    assert summary["progress"]["step"] == steps[-1], summary
    notes = [
        r.getMessage() for r in caplog.records if r.getMessage().startswith("The run's note is")
    ]
    assert any(f"Training: step {steps[0]}/100" in note for note in notes), notes
    assert not logged_note(caplog.records).startswith("Training:")  # outcome's is the last
    assert result.leftovers == []
