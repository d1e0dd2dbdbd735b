"""The held-out report: the best step by its items, each benchmark's paired verdicts, the
overall verdict against a reference, guard falls, and the report's JSON round trip."""

from __future__ import annotations

import pytest

from tpu_rl.heldout.paired import Verdict
from tpu_rl.heldout.report import BASE, CHAMPION, HeldoutReport, heldout_report, report_of


def items(right: int, total: int = 200, offset: int = 0) -> dict[str, bool]:
    """`total` items of which `right` are answered right: items offset..offset+right-1."""
    return {f"{i}:h{i}": offset <= i < offset + right for i in range(total)}


def test_the_best_step_is_chosen_and_judged_against_each_reference():
    steps = {20: {"gsm8k": items(150)}, 30: {"gsm8k": items(170)}}
    references = {BASE: {"gsm8k": items(120)}, CHAMPION: {"gsm8k": items(168)}}
    report = heldout_report(steps, references, ["gsm8k"], [], 0.05)
    assert report.step == 30 and report.step_scores == {20: 0.75, 30: 0.85}
    [row] = report.rows
    assert (row.candidate, row.base, row.champion, row.items) == (0.85, 0.6, 0.84, 200)
    assert report.verdict(BASE) == Verdict.BETTER  # 50 items only the candidate answered
    assert report.verdict(CHAMPION) == Verdict.NOT_DISTINGUISHABLE  # 2 items: noise
    assert "not distinguishable from the champion" in report.reasons(CHAMPION)[0]


def test_a_significant_loss_on_one_benchmark_outweighs_a_gain_on_another():
    steps = {30: {"gsm8k": items(180), "math": items(60)}}
    references = {BASE: {"gsm8k": items(120), "math": items(120)}}
    report = heldout_report(steps, references, ["gsm8k", "math"], [], 0.05)
    assert report.verdict(BASE) == Verdict.WORSE
    assert report.verdict(CHAMPION) is None  # no champion scored


def test_a_guard_that_fell_is_named_and_does_not_choose_the_step():
    steps = {
        10: {"gsm8k": items(150), "arc_easy": items(150)},
        20: {"gsm8k": items(160), "arc_easy": items(80)},
    }
    references = {BASE: {"gsm8k": items(120), "arc_easy": items(150)}}
    report = heldout_report(steps, references, ["gsm8k"], ["arc_easy"], 0.05)
    assert report.step == 20  # the guard is not scored for the choice
    [fall] = report.guard_falls()
    assert fall.startswith("guard arc_easy: worse than the base model: 40.0% vs 75.0%")
    assert report.verdict(BASE) == Verdict.BETTER  # guards are held, never a verdict


def test_ties_go_to_the_later_step():
    steps = {10: {"gsm8k": items(150)}, 20: {"gsm8k": items(150, offset=10)}}
    assert heldout_report(steps, {}, ["gsm8k"], [], 0.05).step == 20


def test_a_model_missing_a_benchmark_or_scored_on_other_items_is_refused():
    with pytest.raises(ValueError, match="base has no results for gsm8k"):
        heldout_report({1: {"gsm8k": items(1)}}, {BASE: {}}, ["gsm8k"], [], 0.05)
    with pytest.raises(ValueError, match="scored for one model only"):
        heldout_report(
            {1: {"gsm8k": items(1, 10)}}, {BASE: {"gsm8k": items(1, 11)}}, ["gsm8k"], [], 0.05
        )
    with pytest.raises(ValueError, match="no step was scored"):
        heldout_report({}, {}, ["gsm8k"], [], 0.05)


def test_the_report_comes_back_from_its_xcom_with_the_same_verdicts():
    steps = {30: {"gsm8k": items(170), "arc_easy": items(90)}}
    references = {
        BASE: {"gsm8k": items(120), "arc_easy": items(150)},
        CHAMPION: {"gsm8k": items(140), "arc_easy": items(100)},
    }
    report = heldout_report(steps, references, ["gsm8k"], ["arc_easy"], 0.01)
    back = report_of(report.as_dict())
    assert back == report
    assert back is not None and back.guard_falls() == report.guard_falls()
    assert report_of(None) is None  # evaluate_heldout skipped: nothing pushed
    assert HeldoutReport.from_dict(report.as_dict()).alpha == 0.01
