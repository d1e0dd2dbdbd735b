"""tpu_rl.promotion.comparison: the challenger against the champion, metric by metric."""

from __future__ import annotations

import math

import pytest

from tests.support.comparison import CHAMPION, RECORD, REWARD, metrics
from tpu_rl.heldout.report import BASE as HELDOUT_BASE
from tpu_rl.heldout.report import CHAMPION as HELDOUT_CHAMPION
from tpu_rl.heldout.report import HeldoutReport, heldout_report
from tpu_rl.promotion.comparison import NO_CHAMPION, compare_with_champion, on_heldout


def test_the_first_run_has_no_champion_to_beat():
    result = compare_with_champion(None, None, metrics(mean_reward=0.1), REWARD)
    assert result["beats"] and result["reason"] == NO_CHAMPION
    assert result["champion"] is None and result["champion_metrics"] is None


def test_a_challenger_that_beats_its_base_can_still_lose_to_the_champion():
    result = compare_with_champion(RECORD, CHAMPION, metrics(mean_reward=0.1234), REWARD)
    assert not result["beats"]
    assert result["reason"] == (
        "not promoted: loses to the champion from run scheduled__2026-11-26: "
        "mean_reward 0.1234 vs champion 0.2 (needs +0)"
    )
    assert result["champion"] == RECORD and result["champion_metrics"] == CHAMPION


def test_every_named_metric_must_clear_its_gain_and_a_tie_with_gain_0_beats():
    gains = {"mean_reward": 0.0, "accuracy": 1.0}
    tie = compare_with_champion(RECORD, CHAMPION, metrics(accuracy=21.0), gains)
    assert tie["beats"] and tie["reason"].startswith("beats the champion from run")
    short = compare_with_champion(RECORD, CHAMPION, metrics(accuracy=20.5), gains)
    assert not short["beats"] and "accuracy 20.5 vs champion 20 (needs +1)" in short["reason"]
    assert "mean_reward" not in short["reason"]  # only the shortfalls are named


def test_a_negative_gain_is_the_loss_allowed():
    gains = {"format_accuracy": -5.0}
    assert compare_with_champion(RECORD, CHAMPION, metrics(format_accuracy=85.0), gains)["beats"]
    assert not compare_with_champion(RECORD, CHAMPION, metrics(format_accuracy=84.9), gains)[
        "beats"
    ]


@pytest.mark.parametrize(
    ("champion", "challenger", "named"),
    [
        (CHAMPION, metrics(mean_reward=None), "mean_reward for the challenger (got None)"),
        (metrics(mean_reward=math.nan), CHAMPION, "mean_reward for the champion (got nan)"),
        ({"accuracy": 20.0}, CHAMPION, "mean_reward for the champion (got None)"),
    ],
)
def test_a_missing_or_nan_metric_is_not_promoted_and_says_which(champion, challenger, named):
    result = compare_with_champion(RECORD, champion, challenger, REWARD)
    assert not result["beats"] and result["reason"] == f"not promoted: no usable {named}"


def heldout_against_champion(champion_right: int) -> HeldoutReport:
    """A step answering 150 of 200 items right, the champion `champion_right` of them."""

    def items(right: int) -> dict[str, bool]:
        return {f"{i}:h": i < right for i in range(200)}

    references = {
        HELDOUT_CHAMPION: {"gsm8k": items(champion_right)},
        HELDOUT_BASE: {"gsm8k": items(champion_right)},
    }
    return heldout_report({30: {"gsm8k": items(150)}}, references, ["gsm8k"], [], 0.05)


def test_on_heldout_items_only_a_significant_gain_beats_the_champion():
    """The trainer's numbers say it beats the champion; the held-out items decide."""
    trainer = compare_with_champion(RECORD, CHAMPION, metrics(mean_reward=0.3), REWARD)
    assert trainer["beats"]
    better = on_heldout(trainer, heldout_against_champion(120))
    assert better["beats"] and better["heldout_verdict"] == "better"
    assert better["reason"].startswith(
        "beats the champion from run scheduled__2026-11-26 on the held-out items: gsm8k: better"
    )
    assert better["trainer_reason"] == trainer["reason"]
    tie = on_heldout(trainer, heldout_against_champion(147))
    assert not tie["beats"] and tie["heldout_verdict"] == "not_distinguishable"
    assert tie["reason"].startswith("not promoted: not distinguishable from the champion from run")
    worse = on_heldout(trainer, heldout_against_champion(190))
    assert not worse["beats"] and worse["reason"].startswith("not promoted: worse than")


def test_a_deployments_first_export_must_beat_the_base_model_on_heldout_items():
    first = compare_with_champion(None, None, metrics(mean_reward=0.1), REWARD)
    better = on_heldout(first, heldout_against_champion(120))  # the base: 120 of 200
    assert better["beats"] and better["reason"].startswith(
        "beats the base model on the held-out items (no champion yet: the first must beat it)"
    )
    tie = on_heldout(first, heldout_against_champion(149))
    assert not tie["beats"] and tie["reason"].startswith(
        "not promoted: not distinguishable from the base model on the held-out items"
    )
    assert tie["trainer_reason"] == first["reason"]
