"""tpu_rl.ui.heldout_view: the held-out evaluation as the RL page draws it beside the trainer's
reward per step, and its table per benchmark."""

from __future__ import annotations

import pytest

from tests.support.heldout import ARC, GSM8K, MMLU_FELL, heldout, without_champion
from tpu_rl.heldout.table import reading_line, verdict_line
from tpu_rl.ui.heldout_view import heldout_view


def test_each_scored_step_in_step_order_and_the_best_step():
    view = heldout_view(heldout(GSM8K, step=80, step_scores={"100": 0.7, "60": 0.68, "80": 0.72}))
    assert view["step"] == 80
    assert view["scores"] == [
        {"step": 60, "score": 0.68},
        {"step": 80, "score": 0.72},
        {"step": 100, "score": 0.7},
    ]


def test_a_row_per_benchmark_with_its_accuracies_and_verdicts_in_words():
    report = heldout(GSM8K, ARC, MMLU_FELL)
    view = heldout_view(report)
    assert [(r["task"], r["guard"], r["items"]) for r in view["rows"]] == [
        ("gsm8k", False, 1000),
        ("arc_easy", False, 400),
        ("mmlu", True, 500),
    ]
    gsm8k = view["rows"][0]
    assert (gsm8k["candidate"], gsm8k["champion"], gsm8k["base"]) == (0.76, 0.74, 0.64)
    assert gsm8k["vs_base"]["verdict"] == "better"
    assert gsm8k["vs_champion"]["verdict"] == "not distinguishable"
    assert gsm8k["vs_champion"]["difference"] == pytest.approx(0.02)
    low, high = gsm8k["vs_champion"]["interval"]  # the Markdown table's "+0.0 to +4.0"
    assert (round(low * 100, 1), round(high * 100, 1)) == (0.0, 4.0)
    assert gsm8k["vs_base"]["says"].startswith("better than the base model: 76.0% vs 64.0%")
    assert view["rows"][2]["vs_base"]["verdict"] == "worse"  # the guard that fell
    # the lines the run's report prints around the same table
    assert view["level"] == "95%"
    assert view["verdict"] == verdict_line(report) and view["reading"] == reading_line(report)


def test_a_reference_not_scored_has_no_verdict():
    (row,) = heldout_view(heldout(without_champion(GSM8K)))["rows"]
    assert row["champion"] is None and row["vs_champion"] is None
    assert row["vs_base"]["verdict"] == "better"
