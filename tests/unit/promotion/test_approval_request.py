"""tpu_rl.promotion.approval_request: the run's note and text a waiting approval sends, within
Airflow's note limit."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.support.approval import COMPARISON, DECISION, TPU, case
from tpu_rl.promotion.approval_text import (
    ApprovalCase,
)
from tpu_rl.promotion.exported import ExportedModel

DEMO_METRICS = {
    "corr": 12,
    "total": 64,
    "accuracy": 18.75,
    "partial_accuracy": 20.3125,
    "format_accuracy": 85.9375,
    "mean_reward": 0.1234,
}


DEMO_CHAMPION = "manual__2026-12-05T19:55:21.917132+00:00"


DEMO_CASE = {
    "run_id": "manual__2026-12-05T19:57:00.459510+00:00",
    "export": ExportedModel("gs://b/m/hf-trained/rl-2/", "gs://b/m/ck/20/", 20, DEMO_METRICS),
    "gate": {
        "metrics": {
            name: {
                "pre": pre,
                "candidate": DEMO_METRICS[name],
                "gain": DEMO_METRICS[name] - pre,
                "min_gain": gain,
                "passed": True,
            }
            for name, pre, gain in (
                ("accuracy", 12.5, None),
                ("partial_accuracy", 20.3125, None),
                ("format_accuracy", 85.9375, None),
                ("mean_reward", 0.0821, 0.0),
            )
        }
    },
    "comparison": {
        "champion": {"run_id": DEMO_CHAMPION},
        "champion_metrics": DEMO_METRICS | {"corr": 10, "accuracy": 15.625, "mean_reward": 0.1},
        "challenger_metrics": DEMO_METRICS,
        "beats": True,
        "reason": f"beats the champion from run {DEMO_CHAMPION}: mean_reward 0.1234 vs "
        "champion 0.1 (needs +0)",
    },
    "tpu": TPU
    | {
        "chip_hours": 0.2932,
        "host_hours": 0.0733,
        "estimated_cost_usd": 0.3562,
        "price": {
            "usd_per_chip_hour": 1.215,
            "basis": "list price",
            "source": "Cloud Billing catalogue (TPU SKUs), as mirrored by public price catalogues",
            "read": "2026-12-04",
            "region": "us-east5",
            "mode": "spot",
            "capacity": "spot",
        },
    },
    "capacity": "spot",
    "deadline": datetime(2026, 12, 6, 19, 57, tzinfo=UTC),
}


@pytest.mark.parametrize("gated", [["mean_reward"], ["accuracy", "partial_accuracy"]])
def test_a_note_too_long_for_airflow_keeps_the_link_the_verdicts_the_cost_and_the_timeout(gated):
    """A run's note holds at most 1,000 characters: the one a waiting approval sets keeps its
    link, the verdicts, the cost and what no answer does whole, and the gated metrics' lines;
    the metric lines that do not fit are named, left to the Required Actions page."""
    from tpu_rl.promotion.approval_request import ApprovalRequest
    from tpu_rl.report.run_note import NOTE_LIMIT

    gate = {
        "metrics": {
            name: row | {"min_gain": 0.0 if name in gated else None}
            for name, row in DEMO_CASE["gate"]["metrics"].items()
        }
    }
    facts = DEMO_CASE | {"gate": gate}
    url = f"http://127.0.0.1:8093{DECISION}?map_index=-1"
    note = ApprovalRequest("tpu_rl_post_training", facts["run_id"], url, ApprovalCase(**facts)).note
    assert len(note) <= NOTE_LIMIT
    lines = note.split("\n\n")
    assert lines[0] == f"**Awaiting approval**: [Approve or reject]({url})"
    assert lines[-1] == (
        "No answer by 2026-12-06 19:57 UTC answers **Reject** (the run's "
        "approval_timeout_answer): the export stays where it is, unpromoted."
    )
    assert lines[-2].startswith("TPU cost so far: 0.29 chip-hours") and lines[-2].endswith(")")
    assert lines[-3] == f"Champion: {DEMO_CASE['comparison']['reason']}"
    assert lines[-4].startswith("Gate: passed: ")
    gate_line = lines[-4]
    assert all(f"{name} {DEMO_METRICS[name]:.4f} vs base" in gate_line for name in gated)
    # each metric has its line, or is named in the line before the verdicts, the first gated
    # one always shown; MaxText's counts (corr, total) left out before the evaluation metrics
    more = lines[-5].removeprefix("More on the Required Actions page: ")
    assert more != lines[-5], note
    shown = [line.split(":")[0] for line in lines[1:-5]]
    assert sorted(shown + more.split(", ")) == sorted(DEMO_METRICS), note
    assert gated[0] in shown and {"corr", "total"} <= set(more.split(", ")), note


def test_verdicts_too_long_for_the_note_are_cut_before_what_no_answer_does():
    from tpu_rl.promotion.approval_request import ApprovalRequest
    from tpu_rl.report.run_note import NOTE_LIMIT

    long = {**COMPARISON, "reason": "accuracy +0.03 >= +0.01; " * 60}
    note = ApprovalRequest("d", "manual__1", "http://x/a", case(comparison=long)).note
    assert len(note) <= NOTE_LIMIT
    *head, last = note.split("\n\n")
    assert head[0] == "**Awaiting approval**: [Approve or reject](http://x/a)"
    assert head[-1].endswith("(cut: the Required Actions page has it whole)")
    assert last.startswith("No answer by 2026-05-02 12:30 UTC answers **Reject**")


def test_a_note_that_fits_is_the_whole_summary():
    from tpu_rl.promotion.approval_request import ApprovalRequest

    request = ApprovalRequest("tpu_rl_post_training", "manual__1", "http://x/a", case())
    assert request.note.split("\n\n")[1:] == request.summary
