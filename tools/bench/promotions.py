"""Wrong promotions over a simulated suite of champion/challenger pairs with known true
differences, each pair scored item by item on one held-out benchmark.

- wrong_promotions: pairs promoted whose challenger is truly no better than its champion (true
  gain <= 0), under the paired verdict (tpu_rl.heldout.paired: McNemar's exact test at ALPHA,
  promoted when `better`). Goal: at most ALPHA of those pairs, the level the verdict states.
  Baseline: today's rule on the same pairs and the same items, mean against mean with
  `min_gain_over_champion`'s default gain of 0 (tpu_rl.promotion.comparison.
  compare_with_champion). Details give each rule's promotion rate at each true gain and its
  power at STATED_GAIN.

The items: ITEMS items (GSM8K's test split), a champion answering CHAMPION_ACCURACY of them
right, and a challenger that, item by item, answers right only DISAGREE of the items the
champion answers wrong and only DISAGREE + gain of those the champion answers wrong otherwise:
the true gain is `gain` exactly in expectation. A pair's items are drawn from its four
categories' probabilities, seeded, so the figure is the same in every run.
"""

from __future__ import annotations

import random
from typing import Any

from tools.bench.metric import metric
from tpu_rl.heldout.paired import Verdict, paired_verdict
from tpu_rl.promotion.comparison import compare_with_champion

ITEMS = 1319  # GSM8K's test split
CHAMPION_ACCURACY = 0.80
DISAGREE = 0.05  # the share of items only the champion answers right
ALPHA = 0.05
STATED_GAIN = 0.03  # the gain whose detection rate the details give (the power)
TRUE_GAINS = (-0.03, -0.02, -0.01, 0.0, 0.0, 0.01, 0.02, 0.03, 0.04)
PAIRS_PER_GAIN = 100
SEED = 62
CHAMPION = {"run_id": "champion"}


def pair_items(gain: float, rng: random.Random) -> tuple[dict[str, bool], dict[str, bool]]:
    """One pair's per-item results (challenger, champion): each item both right, the
    challenger only, the champion only or neither."""
    weights = (
        CHAMPION_ACCURACY - DISAGREE,
        DISAGREE + gain,
        DISAGREE,
        1 - CHAMPION_ACCURACY - DISAGREE - gain,
    )
    kinds = rng.choices(range(4), weights=weights, k=ITEMS)
    challenger = {f"q{i}": kind in (0, 1) for i, kind in enumerate(kinds)}
    champion = {f"q{i}": kind in (0, 2) for i, kind in enumerate(kinds)}
    return challenger, champion


def mean_rule_promotes(challenger: dict[str, bool], champion: dict[str, bool]) -> bool:
    """Today's comparison: the mean accuracies, challenger >= champion + 0."""

    def accuracy(items: dict[str, bool]) -> dict[str, float]:
        return {"accuracy": sum(items.values()) / len(items)}

    compared = compare_with_champion(
        CHAMPION, accuracy(champion), accuracy(challenger), {"accuracy": 0.0}
    )
    return bool(compared["beats"])


def promotion_rates(pairs_per_gain: int = PAIRS_PER_GAIN) -> dict[float, dict[str, int]]:
    """For each true gain: how many of its pairs each rule promoted."""
    rng = random.Random(SEED)
    rates: dict[float, dict[str, int]] = {}
    for gain in TRUE_GAINS:
        counted = rates.setdefault(gain, {"pairs": 0, "paired": 0, "mean": 0})
        for _ in range(pairs_per_gain):
            challenger, champion = pair_items(gain, rng)
            counted["pairs"] += 1
            verdict = paired_verdict(challenger, champion, ALPHA).verdict
            counted["paired"] += verdict is Verdict.BETTER
            counted["mean"] += mean_rule_promotes(challenger, champion)
    return rates


def measure(pairs_per_gain: int = PAIRS_PER_GAIN) -> dict[str, dict[str, Any]]:
    rates = promotion_rates(pairs_per_gain)
    no_better = [r for gain, r in rates.items() if gain <= 0]
    null_pairs = sum(r["pairs"] for r in no_better)
    wrong = sum(r["paired"] for r in no_better)
    baseline = sum(r["mean"] for r in no_better)
    stated = rates[STATED_GAIN]
    by_gain = {
        f"{gain:+.2f}": {
            "pairs": r["pairs"],
            "paired_promoted": r["paired"],
            "mean_rule_promoted": r["mean"],
        }
        for gain, r in rates.items()
    }
    return {
        "wrong_promotions": metric(
            wrong,
            baseline,
            unit="pairs",
            goal=ALPHA * null_pairs,
            baseline_is="mean against mean on the same items, min_gain_over_champion 0",
            details={
                "pairs_truly_no_better": null_pairs,
                "goal_is": f"at most alpha={ALPHA} of the pairs truly no better",
                "items": ITEMS,
                "champion_accuracy": CHAMPION_ACCURACY,
                "champion_only_share": DISAGREE,
                "power_at_stated_gain": {
                    "gain": STATED_GAIN,
                    "paired": stated["paired"] / stated["pairs"],
                    "mean_rule": stated["mean"] / stated["pairs"],
                },
                "by_true_gain": by_gain,
            },
        )
    }
