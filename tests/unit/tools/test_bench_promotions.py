"""The wrong_promotions bench figure: its pairs have the true gain they are drawn for, and the
paired verdict keeps wrong promotions within its level where mean against mean does not."""

from __future__ import annotations

import random
import statistics

import pytest

from tools.bench import promotions


@pytest.mark.parametrize("gain", [-0.02, 0.0, 0.03])
def test_a_pairs_items_differ_by_its_true_gain(gain):
    rng = random.Random(1)
    differences = []
    for _ in range(30):
        challenger, champion = promotions.pair_items(gain, rng)
        assert challenger.keys() == champion.keys() and len(champion) == promotions.ITEMS
        differences.append((sum(challenger.values()) - sum(champion.values())) / len(champion))
    assert statistics.mean(differences) == pytest.approx(gain, abs=0.004)


def test_the_paired_verdict_promotes_fewer_wrong_pairs_than_the_mean_rule():
    figure = promotions.measure(pairs_per_gain=20)["wrong_promotions"]
    details = figure["details"]
    assert details["pairs_truly_no_better"] == 20 * sum(g <= 0 for g in promotions.TRUE_GAINS)
    assert figure["goal_met"], figure
    assert figure["value"] < figure["baseline"], figure
    # at gain 0 mean against mean is a coin toss; it also promotes every pair at +3 points
    even = details["by_true_gain"]["+0.00"]
    assert 0.3 < even["mean_rule_promoted"] / even["pairs"] < 0.7, even
    assert details["power_at_stated_gain"]["paired"] > 0.5, details
