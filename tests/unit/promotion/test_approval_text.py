"""tpu_rl.promotion.approval_text: the body a person reads (metrics beside the champion's, the
cost) and what the answer means for the run's verdict."""

from __future__ import annotations

import pytest

from tests.support.approval import COMPARISON, XComs, case
from tests.support.heldout import GSM8K, MMLU_FELL, heldout, without_champion
from tpu_rl.names import Step
from tpu_rl.promotion.approval_text import (
    approval_body,
    metric_names,
    promotion_line,
    run_promotion,
)


def test_the_body_puts_base_champion_and_challenger_side_by_side_with_verdicts_and_cost():
    body = approval_body(case())
    assert "checkpoint step 100 to `gs://b/m/hf-trained/rl-1/`" in body
    header = "| metric | base (pre-training) | champion (scheduled__last-week) | this export "
    assert header + "(challenger) |" in body
    assert "| accuracy | 0.3000 | 0.3800 | 0.4100 |" in body
    assert "| mean_reward | 0.9000 | 1.1000 | 1.2000 |" in body
    assert "Gate: passed: mean_reward 1.2000 vs base 0.9000 (gain 0.3000, needs +0.1)" in body
    assert "Champion: accuracy +0.03 >= +0.01" in body
    assert "16.00 chip-hours = 4.00 host-hours" in body and "no price known" in body
    assert "No answer by 2026-05-02 12:30 UTC answers **Reject**" in body


def test_the_first_champion_and_a_run_without_comparison_say_so():
    first = approval_body(case(comparison={**COMPARISON, "champion": None}, tpu=None))
    assert (
        "| metric | base (pre-training) | champion: none yet | this export (challenger) |" in first
    )
    assert "| accuracy | 0.3000 | n/a | 0.4100 |" in first
    assert "Champion: none yet, this export would be the first" in first
    assert "TPUs: not counted" in first
    alone = approval_body(case(comparison=None))
    assert "champion: not compared" in alone and "Champion: no comparison ran" in alone


def test_a_timeout_that_approves_says_so_in_the_body():
    body = approval_body(case(timeout_option="Approve"))
    assert "answers **Approve**" in body and "becomes this deployment's champion" in body


@pytest.mark.parametrize(
    ("promoted", "approval", "comparison", "line"),
    [
        (
            {"registry_version": None},
            {"approval": "none"},
            None,
            "promoted (approval not required)",
        ),
        (
            {"registry_version": "projects/p/locations/r/models/m@3"},
            {"chosen_options": ["Approve"], "responded_by_user": {"id": "1", "name": "ana"}},
            COMPARISON,
            "promoted (approved by ana); Vertex AI version projects/p/locations/r/models/m@3",
        ),
        (
            None,
            {"chosen_options": ["Reject"], "responded_by_user": {"id": "2", "name": "bo"}},
            COMPARISON,
            "not promoted: rejected by bo; the export stays",
        ),
        (
            None,
            {"chosen_options": ["Reject"], "responded_by_user": None},
            COMPARISON,
            "not promoted: the approval timed out (rejected); the export stays",
        ),
        (
            {"registry_version": None},
            {"chosen_options": ["Approve"], "responded_by_user": None},
            COMPARISON,
            "promoted (approved on timeout: approval_timeout_answer=approve)",
        ),
        (
            None,
            None,
            {**COMPARISON, "beats": False, "reason": "accuracy -0.02 < +0.01"},
            "not promoted: accuracy -0.02 < +0.01",
        ),
        (  # compare_champion's own words (promotion.comparison): said once
            None,
            None,
            {**COMPARISON, "beats": False, "reason": "not promoted: loses to the champion"},
            "not promoted: loses to the champion",
        ),
    ],
)
def test_the_run_says_whether_it_promoted_and_why_not(promoted, approval, comparison, line):
    assert promotion_line(promoted, approval, comparison) == line


def test_the_verdict_reads_the_steps_results():
    ti = XComs(
        {
            (Step.APPROVE, "answer"): {
                "chosen_options": ["Reject"],
                "responded_by_user": {"name": "bo"},
            },
            (Step.COMPARE_CHAMPION, "return_value"): COMPARISON,
        }
    )
    assert run_promotion(ti) == "not promoted: rejected by bo; the export stays"


def test_a_held_run_says_why_first_in_the_body_and_the_summary():
    from tpu_rl.heldout.hold import Hold
    from tpu_rl.promotion.approval_text import approval_summary

    hold = Hold("the training reward rose while ...", ("batch reward 0.1 -> 0.5", "length x3"))
    body = approval_body(case(hold=hold))
    held = body.index("## Held: possible reward hacking")
    assert held < body.index("## Evaluation")
    assert "Held for a person's approval: the training reward rose while ...." in body
    assert "- batch reward 0.1 -> 0.5\n- length x3" in body
    summary = approval_summary(case(hold=hold))
    assert "Held for a person's approval: the training reward rose while ...." in summary
    assert not any(line.startswith("Held") for line in approval_summary(case()))


def test_the_verdict_says_why_a_person_was_asked_when_the_run_held_it():
    timed_out = {"chosen_options": ["Reject"], "responded_by_user": None}
    line = promotion_line(None, timed_out, COMPARISON, held="the reward rose while ...")
    assert line.endswith("; held for a person because the reward rose while ..."), line
    assert "held" not in promotion_line(None, timed_out, COMPARISON)


def test_the_body_shows_the_held_out_benchmarks_only_when_they_were_evaluated():
    body = approval_body(case(heldout=heldout(GSM8K, MMLU_FELL)))
    section = body.index("## Held-out benchmarks")
    assert body.index("## Evaluation") < section < body.index("## Cost")
    assert "| Benchmark | Items | Candidate (step 100) | Champion | Base |" in body
    assert (
        "| gsm8k | 1,000 | 76.0% | 74.0% | 64.0% | +2.0 (+0.0 to +4.0) | not distinguishable "
        "| +12.0 (+9.3 to +14.7) | better |" in body
    )
    assert "| mmlu (guard) | 500 | 62.0% |" in body
    assert "step 100 is the best of them on these same items" in body
    first = approval_body(case(heldout=heldout(without_champion(GSM8K))))
    assert "| gsm8k | 1,000 | 76.0% | — | 64.0% | — | — |" in first
    assert approval_body(case(heldout=None)) == approval_body(case())
    assert "Held-out" not in approval_body(case())


def test_an_intermediate_eval_lines_origin_is_no_metric_row():
    """The export of a step with its own Intermediate Eval (export_checkpoint=best, or the
    held-out evaluation's best step) carries the line's kind, attempt, step and time: none is
    a row of the table, its counts are."""
    line = {"kind": "intermediate", "attempt": 1, "step": 30, "time": "t", "corr": 12}
    columns = {"base": {"mean_reward": 0.1}, "export": {**line, "mean_reward": 0.2}}
    assert metric_names(columns) == ["mean_reward", "corr"]
