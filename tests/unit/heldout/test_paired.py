"""The paired verdict, judged by scipy's exact binomial test where it can be (scipy is in the
test environment, not a dependency of the package)."""

from __future__ import annotations

import itertools
import random

import pytest
from scipy.stats import binomtest

from tpu_rl.heldout.paired import (
    PairedCounts,
    Verdict,
    difference_interval,
    mcnemar_exact_p,
    paired_verdict,
    smallest_detectable_gain,
)


def items(both: int, candidate_only: int, reference_only: int, neither: int):
    """Per-item results with these counts: (candidate, reference), item ids q0, q1, ..."""
    rows = (
        [(True, True)] * both
        + [(True, False)] * candidate_only
        + [(False, True)] * reference_only
        + [(False, False)] * neither
    )
    random.Random(len(rows)).shuffle(rows)
    return (
        {f"q{i}": c for i, (c, _) in enumerate(rows)},
        {f"q{i}": r for i, (_, r) in enumerate(rows)},
    )


@pytest.mark.parametrize(
    "b, c", [(b, c) for b, c in itertools.product(range(0, 26, 5), repeat=2)] + [(61, 40)]
)
def test_the_exact_p_value_is_scipys_two_sided_binomial_test_on_the_discordant_items(b, c):
    expected = 1.0 if b + c == 0 else binomtest(b, b + c, 0.5).pvalue
    assert mcnemar_exact_p(b, c) == pytest.approx(expected, rel=1e-9)


def test_counts_of_the_items_each_model_answered():
    candidate, reference = items(700, 40, 25, 200)
    counts = PairedCounts.of_items(candidate, reference)
    assert counts == PairedCounts(700, 40, 25, 200)
    assert counts.items == 965 and counts.discordant == 65
    assert counts.difference == pytest.approx(15 / 965)
    assert counts.candidate_accuracy - counts.reference_accuracy == pytest.approx(15 / 965)


def test_items_scored_for_one_model_only_are_refused_by_name():
    with pytest.raises(ValueError, match=r"1 item\(s\) scored for one model only \(q9\)"):
        PairedCounts.of_items({"q1": True, "q9": True}, {"q1": False})
    with pytest.raises(ValueError, match="no item was scored"):
        PairedCounts.of_items({}, {})


def test_a_gain_larger_than_the_noise_is_better_and_a_loss_is_worse():
    better = paired_verdict(*items(1000, 60, 25, 234), alpha=0.05)
    assert better.verdict is Verdict.BETTER and better.p_value < 0.001
    worse = paired_verdict(*items(1000, 25, 60, 234), alpha=0.05)
    assert worse.verdict is Verdict.WORSE and worse.p_value == better.p_value
    low, high = better.interval
    assert 0 < low < better.counts.difference < high


def test_twelve_against_ten_of_64_is_not_distinguishable_and_says_so():
    """The demo's approval page: 12 correct answers against 10 out of 64."""
    verdict = paired_verdict(*items(8, 4, 2, 50), alpha=0.05)
    assert verdict.verdict is Verdict.NOT_DISTINGUISHABLE
    assert verdict.p_value == pytest.approx(binomtest(4, 6, 0.5).pvalue)
    low, high = verdict.interval
    assert low < 0 < high
    line = verdict.says("the champion")
    assert line.startswith("not distinguishable from the champion: 18.8% vs 15.6% on 64 items")
    assert "(+3.1 points, 95% interval " in line and "McNemar exact p=0.688" in line
    assert "4 item(s) only it answered right, 2 only the champion" in line
    assert "95% interval -4.3 to +10.6 points" in line
    # 6 items split: all 6 for the candidate (p = 2/64) would be the least it could show
    assert line.endswith("these items could show a gain of 9.4 points at the least)")
    assert verdict.smallest_detectable_gain == 6 / 64


def test_the_smallest_detectable_gain_is_the_first_significant_lead():
    # 1,319 GSM8K items, 130 answered right by one model only
    gain = smallest_detectable_gain(1319, 130, 0.05)
    lead = round(gain * 1319)
    assert mcnemar_exact_p((130 + lead) // 2, (130 - lead) // 2) < 0.05
    assert mcnemar_exact_p((130 + lead - 2) // 2, (130 - lead + 2) // 2) >= 0.05
    assert smallest_detectable_gain(64, 0, 0.05) is None  # no discordant item: nothing to show


def test_the_interval_is_clipped_and_zero_wide_without_discordant_items():
    counts = PairedCounts(10, 0, 0, 5)
    assert difference_interval(counts, 0.05) == (0.0, 0.0)
    assert difference_interval(PairedCounts(0, 3, 0, 0), 0.05) == (1.0, 1.0)


@pytest.mark.parametrize("alpha", [0, 1, -0.1, 1.5])
def test_a_level_outside_zero_and_one_is_refused(alpha):
    with pytest.raises(ValueError, match="between 0 and 1"):
        paired_verdict({"q": True}, {"q": False}, alpha)
