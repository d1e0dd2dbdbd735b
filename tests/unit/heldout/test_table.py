"""tpu_rl.heldout.table: the held-out evaluation as a table a person reads, shorter lines, and
the model registry's labels."""

from __future__ import annotations

import re

import pytest

from tests.support.heldout import ARC, GSM8K, MMLU_FELL, heldout, row, without_champion
from tpu_rl.heldout.table import (
    LABELS_PER_RESOURCE,
    benchmark_lines,
    benchmark_table,
    heldout_labels,
    verdict_line,
)

HEADER = (
    "| Benchmark | Items | Candidate (step 100) | Champion | Base "
    "| vs champion, points (95% interval) | verdict vs champion "
    "| vs base, points (95% interval) | verdict vs base |"
)


def test_a_row_per_benchmark_with_each_reference_its_difference_interval_and_verdict():
    table = benchmark_table(heldout(GSM8K, ARC, MMLU_FELL))
    assert table[:2] == [HEADER, "|---" * 9 + "|"]
    assert table[2:5] == [
        "| gsm8k | 1,000 | 76.0% | 74.0% | 64.0% | +2.0 (+0.0 to +4.0) | not distinguishable "
        "| +12.0 (+9.3 to +14.7) | better |",
        "| arc_easy | 400 | 67.5% | 66.0% | 62.5% | +1.5 (-1.4 to +4.4) | not distinguishable "
        "| +5.0 (+1.9 to +8.1) | better |",
        "| mmlu (guard) | 500 | 62.0% | 62.0% | 68.0% | +0.0 (-1.8 to +1.8) "
        "| not distinguishable | -6.0 (-8.7 to -3.3) | worse |",
    ]
    assert table[5] == ""


def test_the_line_under_the_table_gives_the_level_the_smallest_gain_and_the_choice_of_step():
    """Two steps scored: the best of them was picked on these items, which the line says."""
    line = benchmark_table(heldout(GSM8K, MMLU_FELL))[-1]
    assert line.startswith("Level 95% (McNemar's exact test, p < 0.05). ")
    assert (
        "The smallest gain these items could show: gsm8k 2.2 points vs the champion, 3.0 points "
        "vs the base model; mmlu 2.0 points vs the champion, 3.2 points vs the base model." in line
    )
    assert line.endswith(
        "2 steps scored (80, 100); step 100 is the best of them on these same items, so its "
        "verdicts lean its way (heldout_top_k 1 avoids it)."
    )
    one = benchmark_table(heldout(GSM8K, step_scores={"100": 0.76}, alpha=0.1))[-1]
    assert one.startswith("Level 90% (McNemar's exact test, p < 0.1). ")
    assert one.endswith("1 step scored (step 100): not chosen on these items.")


def test_a_first_run_without_a_champion_shows_a_dash_where_it_was_not_scored():
    report = heldout(without_champion(GSM8K))
    table = benchmark_table(report)
    assert (
        table[2] == "| gsm8k | 1,000 | 76.0% | — | 64.0% | — | — | +12.0 (+9.3 to +14.7) | better |"
    )
    assert "gsm8k 3.0 points vs the base model." in table[-1]
    assert "champion" not in verdict_line(report)
    assert benchmark_lines(report) == [
        "gsm8k: 76.0% on 1,000 items; champion —; base 64.0% (better, +12.0 points)"
    ]


def test_items_that_could_show_no_gain_say_so():
    tiny = row("tiny", (1, 1, 0, 1))  # one discordant item: never significant
    assert "tiny none possible vs the base model." in benchmark_table(heldout(tiny))[-1]


def test_the_verdict_line_names_each_reference_and_each_guard_that_fell():
    assert verdict_line(heldout(GSM8K, MMLU_FELL)) == (
        "Held-out (95% level): step 100 better than the base model, not distinguishable from the "
        "champion; guard mmlu worse than the base model"
    )
    assert verdict_line(heldout(GSM8K)).endswith("not distinguishable from the champion")


LABEL = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")


def test_labels_carry_the_step_and_each_scored_benchmarks_accuracy_and_verdicts():
    labels = heldout_labels(heldout(GSM8K, ARC, MMLU_FELL))
    assert labels == {
        "heldout_step": "100",
        "heldout_gsm8k_acc": "760",  # tenths of a point: 76.0%
        "heldout_gsm8k_vs_champion": "not_distinguishable",
        "heldout_gsm8k_vs_base": "better",
        "heldout_arc_easy_acc": "675",
        "heldout_arc_easy_vs_champion": "not_distinguishable",
        "heldout_arc_easy_vs_base": "better",
    }  # no guard: it is not a scored benchmark
    first = heldout_labels(heldout(without_champion(GSM8K)), prefix="tpu-rl-")
    assert first == {
        "tpu-rl-heldout_step": "100",
        "tpu-rl-heldout_gsm8k_acc": "760",
        "tpu-rl-heldout_gsm8k_vs_base": "better",
    }


@pytest.mark.parametrize(
    ("task", "key"),
    [
        ("ARC.Easy", "tpu-rl-heldout_arc_easy-"),
        (
            "leaderboard_math_algebra_hard_with_a_very_long_name",
            "tpu-rl-heldout_leaderboard_math_algebra_hard-",
        ),
    ],
)
def test_label_keys_are_valid_and_keep_names_that_had_to_change_apart(task, key):
    """lm-eval names may hold capitals and dots, or be long: such a key is made valid, cut to
    fit and ends with the name's hash, so 'ARC.Easy' and 'arc_easy' keep keys of their own."""
    labels = heldout_labels(heldout(row(task, *GSM8K_COUNTS), ARC), prefix="tpu-rl-")
    assert all(LABEL.match(k) and VALUE.match(v) for k, v in labels.items()), labels
    assert len(labels) == 7, labels  # arc_easy's three apart from the other name's three
    changed = [k for k in labels if k.startswith(key)]
    assert len(changed) == 3 and re.fullmatch(rf"{key}[0-9a-f]{{6}}_acc", changed[0]), changed
    assert max(map(len, labels)) <= 63


GSM8K_COUNTS = ((600, 160, 40, 200), (700, 60, 40, 200))


def test_labels_stay_within_the_room_a_benchmark_all_or_none():
    many = heldout(*(row(f"task{i}", *GSM8K_COUNTS) for i in range(30)))
    labels = heldout_labels(many)
    assert len(labels) == 1 + 3 * 21 == LABELS_PER_RESOURCE  # the step, 21 whole benchmarks
    assert "heldout_task20_vs_base" in labels and "heldout_task21_acc" not in labels
    assert len(heldout_labels(many, room=61)) == 1 + 3 * 20
    assert heldout_labels(many, room=0) == {}
