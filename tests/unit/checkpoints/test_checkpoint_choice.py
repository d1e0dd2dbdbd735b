"""The checkpoint a run exports: the newest committed step, or the committed step whose
evaluation ranks first on best_metric (ties to the later step), else the last, saying so."""

from __future__ import annotations

from typing import Any

import pytest

from tpu_rl import storage
from tpu_rl.checkpoints import checkpoint_choice
from tpu_rl.checkpoints.checkpoint_choice import BEST, LAST, choose, choose_for_run

URI = "gs://b/m/trained/run/checkpoints/actor/"


def ev(reward: float | None, accuracy: float = 10.0) -> dict[str, Any]:
    return {"mean_reward": reward, "accuracy": accuracy}


SCORED = {10: ev(0.25, 30.0), 20: ev(0.31, 5.0), 30: ev(0.2), 40: ev(0.25, 20.0), 50: ev(0.12)}


def committed_but(*cut: int):
    asked: list[int] = []

    def committed(step: int) -> bool:
        asked.append(step)
        return step not in cut

    return committed, asked


def test_best_is_the_argmax_over_committed_steps_ties_to_the_later():
    committed, asked = committed_but(20)
    step, choice, reason = choose(BEST, "mean_reward", SCORED, 50, committed)
    assert (step, choice) == (40, BEST) and "mean_reward=0.25, the best committed" in reason
    assert asked == [20, 40]  # best-ranked first, stops at the first committed


def test_best_on_another_metric():
    committed, _ = committed_but()
    assert choose(BEST, "accuracy", SCORED, 50, committed)[:2] == (10, BEST)


def test_steps_past_the_newest_committed_one_are_never_candidates():
    committed, asked = committed_but()
    step, _, _ = choose(BEST, "mean_reward", {**SCORED, 60: ev(0.9)}, 50, committed)
    assert step == 20 and 60 not in asked


def test_last_takes_the_newest_committed_step_without_asking():
    committed, asked = committed_but()
    assert choose(LAST, "mean_reward", SCORED, 50, committed)[:2] == (50, LAST) and asked == []


def test_no_committed_step_with_an_evaluation_falls_back_to_last_and_says_so():
    committed, _ = committed_but(10, 20, 30, 40)
    scored = {**SCORED, 50: ev(None)}  # NaN: no value to rank
    step, choice, reason = choose(BEST, "mean_reward", scored, 50, committed)
    assert (step, choice) == (50, LAST)
    assert "found no committed step with an evaluation of mean_reward" in reason


def test_the_post_line_scores_the_final_step(monkeypatch):
    """Steps 10..40 evaluated; the final save (50) is cut, so 40 is the newest committed step;
    the Post line belongs to 50, never to 40."""
    monkeypatch.setattr(storage, "newest_committed_step", lambda uri, conn: (40, [50]))
    monkeypatch.setattr(storage, "step_committed", lambda uri, conn: not uri.endswith("/20"))
    rewards = {
        "intermediate": [{"step": s, **line} for s, line in SCORED.items() if s < 50],
        "post": ev(0.5),
        "attempts": [{"reached_step": 50}],
    }
    picked = choose_for_run(URI, "c", rewards, BEST, "mean_reward")
    assert (picked.step, picked.final_step, picked.uncommitted) == (40, 50, [50])
    assert picked.metrics == {"step": 40, **SCORED[40]}
    last = choose_for_run(URI, "c", rewards, LAST, "mean_reward")
    assert (last.step, last.metrics) == (40, {"step": 40, **SCORED[40]})


def test_the_final_step_is_the_later_of_the_newest_folder_and_the_log():
    assert checkpoint_choice.final_step([25, 50], {"attempts": [{"reached_step": 48}]}) == 50
    assert checkpoint_choice.final_step([25], {"attempts": [{"reached_step": 50}]}) == 50
    assert checkpoint_choice.final_step([], None) is None


def test_nothing_committed_is_an_error(monkeypatch):
    monkeypatch.setattr(storage, "newest_committed_step", lambda uri, conn: (None, [50]))
    with pytest.raises(ValueError, match=r"no committed checkpoint .* \[50\] were never"):
        choose_for_run(URI, "c", {}, BEST, "mean_reward")


def test_after_a_health_anomaly_only_the_steps_before_it_are_chosen(monkeypatch):
    """export_healthy after a reward collapse at step 30's evaluation (its anomaly step: the
    weights checkpoint 30 holds): the saves of 30 and later, committed before training was
    stopped, and their evaluations are never candidates; the reason says so."""
    folders = [10, 20, 30, 40]
    monkeypatch.setattr(storage, "newest_committed_step", lambda uri, conn: (40, []))
    monkeypatch.setattr(storage, "checkpoint_steps", lambda uri, conn: folders)
    monkeypatch.setattr(storage, "step_committed", lambda uri, conn: True)
    rewards = {
        "intermediate": [{"step": 10, **ev(1.0)}, {"step": 20, **ev(2.5)}, {"step": 30, **ev(1.0)}],
        "anomaly": {"rule": "reward_collapse", "step": 30, "anomaly_step": 30},
    }
    for policy in (BEST, LAST):
        picked = choose_for_run(URI, "c", rewards, policy, "mean_reward")
        assert picked.step == 20, (policy, picked)
        assert picked.reason.endswith("before the training health anomaly at step 30")
    assert checkpoint_choice.healthy_checkpoint(URI, "c", 30) == (20, f"{URI}20/")
    assert checkpoint_choice.healthy_checkpoint(URI, "c", 10) == (None, None)
    monkeypatch.setattr(storage, "checkpoint_steps", lambda uri, conn: [30, 40])
    with pytest.raises(ValueError, match="no committed checkpoint before the anomaly at step 30"):
        choose_for_run(URI, "c", rewards, BEST, "mean_reward")


def test_the_heldout_candidates_are_the_best_evaluated_then_the_newest_committed(monkeypatch):
    """heldout_top_k steps: committed only (50 was cut), best by the trainer's evaluation
    first (20, then 10 and 40 tied: the later), then the newest; none at or after an anomaly."""
    monkeypatch.setattr(storage, "checkpoint_steps", lambda uri, conn: [10, 20, 30, 40, 50])
    monkeypatch.setattr(storage, "step_committed", lambda uri, conn: not uri.endswith("/50"))
    rewards = {"intermediate": [{"step": s, **line} for s, line in SCORED.items() if s < 50]}
    candidates = checkpoint_choice.heldout_candidates
    assert candidates(URI, "c", rewards, "mean_reward", 2) == [20, 40]
    assert candidates(URI, "c", rewards, "mean_reward", 3) == [10, 20, 40]
    assert candidates(URI, "c", {}, "mean_reward", 2) == [30, 40]  # no evaluation: the newest
    anomaly = {**rewards, "anomaly": {"rule": "nan", "step": 20, "anomaly_step": 20}}
    assert candidates(URI, "c", anomaly, "mean_reward", 3) == [10]


def test_the_heldout_choice_takes_the_place_of_the_policy(monkeypatch):
    monkeypatch.setattr(storage, "newest_committed_step", lambda uri, conn: (40, []))
    monkeypatch.setattr(storage, "step_committed", lambda uri, conn: True)
    picked = choose_for_run(URI, "c", {}, LAST, "mean_reward", (20, "held-out: the best"))
    assert (picked.step, picked.choice, picked.reason) == (20, "heldout", "held-out: the best")
