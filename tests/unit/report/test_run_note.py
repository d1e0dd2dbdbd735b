"""The run's note: the verdict, the rewards (pre -> post) and the cost, as outcome writes it."""

from __future__ import annotations

from tests.support.heldout import GSM8K, MMLU_FELL, heldout
from tpu_rl.heldout.table import verdict_line
from tpu_rl.report.run_note import NOTE_LIMIT, note_text, training_stopped
from tpu_rl.watch.health import next_step

REWARDS = {"pre": {"mean_reward": 0.08214}, "post": {"mean_reward": 0.12346}}
COST = {
    "chip_hours": 128.0,
    "host_hours": 32.0,
    "estimated_cost_usd": 345.6,
    "price": {"capacity": "reservation", "usd_per_chip_hour": 2.7, "basis": "on-demand equivalent"},
}
REPORT = "gs://b/gemma4-26b/hf-trained/rl-1/run-report.md"


def test_a_successful_runs_note_has_verdict_rewards_cost_and_report():
    text = note_text("succeeded: model exported and verified", REWARDS, COST, REPORT)
    assert text.split("\n\n") == [
        "**succeeded: model exported and verified** Next: the report below has the rewards, "
        "the cost and where the model is.",
        "mean_reward 0.082 -> 0.123 (+0.041)",
        "TPU cost: $345.60 (128.00 chip-hours, 32.00 host-hours; reservation at 2.7 USD per "
        "chip-hour, on-demand equivalent)",
        f"Report: [{REPORT}](https://console.cloud.google.com/storage/browser/_details/b/"
        "gemma4-26b/hf-trained/rl-1/run-report.md)",
        "All runs: [RL post-training page](/plugin/rl-post-training)",
    ]


def test_a_local_report_is_a_file_link(tmp_path):
    """The demo keeps its reports as local files: the note links the file."""
    report = tmp_path / "run-report.md"
    text = note_text("succeeded", REWARDS, COST, str(report))
    assert f"Report: [{report}](file://{report})" in text


def test_a_run_stopped_before_its_rewards_says_what_it_does_not_know():
    text = note_text("failed: the run did not succeed: verify is upstream_failed", None, None, None)
    assert "mean_reward n/a -> n/a" in text and "TPU cost: not counted" in text
    # the first line, all Airflow shows of a note until its pencil icon is pressed,
    # says the outcome and what to do
    assert text.splitlines()[0] == (
        "**failed: the run did not succeed: verify is upstream_failed** Next: fix what it names "
        "(the failed task's log has the whole error), trigger again."
    )
    assert "Report" not in text and "None" not in text


def test_an_unpriced_cost_keeps_its_hours_and_the_note_fits_airflows_limit():
    unpriced = {**COST, "estimated_cost_usd": None, "price": None}
    text = note_text("x" * 2000, {"pre": {"mean_reward": 0.1}}, unpriced, REPORT)
    assert len(text) == NOTE_LIMIT
    short = note_text("failed", {"pre": {"mean_reward": 0.1}}, unpriced, None)
    assert "mean_reward 0.100 -> n/a" in short
    assert "128.00 chip-hours, 32.00 host-hours, no price known" in short


def test_a_run_stopped_for_its_spend_limit_says_so_though_it_exported():
    stop = {"message": "Spend limit: $9.00 projected passes max_spend_usd $8.00; training stopped"}
    text = note_text("succeeded: model exported and verified", {"spend_stop": stop}, None, None)
    assert "Training stopped early. Spend limit: $9.00 projected passes" in text


def test_a_run_trained_to_its_end_has_no_early_stop_line():
    assert training_stopped({"pre": {}, "post": {}}) == []
    assert "stopped early" not in note_text("succeeded", {"pre": {}, "post": {}}, None, None)


def test_a_long_early_stop_line_leaves_its_evidence_out_not_its_end():
    """The export_healthy note is not cut mid-sentence ("Eviden (cut: ...)"): the evidence,
    whole in the task log and the report, gives way first, never the next step."""
    anomaly = {"rule": "nonfinite_loss", "step": 35, "anomaly_step": 35, "why": "loss nan"}
    anomaly |= {"evidence": ["x" * 900], "healthy_checkpoint": "gs://b/run/30/"}
    uri = "gs://b/" + "r" * 150 + "/run-report.md"
    text = note_text("succeeded: model exported and verified", {"anomaly": anomaly}, None, uri)
    assert len(text) <= NOTE_LIMIT
    [stopped] = [part for part in text.split("\n\n") if part.startswith("Training stopped")]
    assert stopped == (
        "Training stopped early; kept and exported: gs://b/run/30/. Training health: "
        "nonfinite_loss at step 35: loss nan; no checkpoint from step 35 on is used. Evidence: "
        f"in the task log and the run report. {next_step(anomaly)}"
    )
    assert stopped.endswith("retries once from the healthy checkpoint on its own).")
    assert "(cut: the report has it whole)" not in text
    assert text.endswith("All runs: [RL post-training page](/plugin/rl-post-training)")


def test_an_early_stop_line_that_fits_keeps_its_evidence_and_ends_with_the_next_step():
    anomaly = {"rule": "stall", "step": 44, "anomaly_step": 45, "why": "no step for 6 s"}
    anomaly |= {
        "evidence": ["Train step 44 training loss: 0.01"],
        "healthy_checkpoint": "gs://b/40/",
    }
    text = note_text("succeeded: model exported and verified", {"anomaly": anomaly}, None, None)
    assert "Evidence: Train step 44 training loss: 0.01. Next: read the last lines" in text


RUN_ID = "manual__2026-03-01T08:00:00+00:00"
RL_LINE = "All runs: [RL post-training page](/plugin/rl-post-training)"
CONSOLE = "https://console.cloud.google.com/storage/browser/_details/b/gemma4-26b/hf-trained/rl-1/"


def report_line(text: str) -> str:
    return next(line for line in text.split("\n\n") if line.startswith("Report: "))


def test_the_report_line_opens_its_page_in_airflow_then_the_object():
    """The console link of the demo's sandbox bucket opens nothing; the report's page
    in Airflow (tpu_rl.ui.app, /tpu-rl/report/<run id>) opens wherever the note does."""
    text = note_text("succeeded: model exported and verified", REWARDS, COST, REPORT, None, RUN_ID)
    assert report_line(text) == (
        "Report: [open](/tpu-rl/report/manual__2026-03-01T08%3A00%3A00%2B00%3A00)"
        f" · [{REPORT}]({CONSOLE}run-report.md)"
    )
    assert text.endswith(RL_LINE)


def test_a_long_run_id_keeps_the_note_within_airflows_limit_with_whole_links():
    """Airflow takes run ids up to 250 characters; quoted, one of ':' is 750: the line keeps
    what fits whole (the page and the object, one of them, or where to look)."""
    verdict = "failed: " + "e" * 200  # with the first line's next step
    plain = note_text(verdict, REWARDS, COST, REPORT, "promoted", "m" * 250)
    assert len(plain) <= NOTE_LIMIT and plain.endswith(RL_LINE)
    assert report_line(plain) == f"Report: [open](/tpu-rl/report/{'m' * 250}) · [{REPORT}]" + (
        f"({CONSOLE}run-report.md)"
    )
    colons = note_text(verdict, REWARDS, COST, REPORT, "promoted", ":" * 250)
    assert len(colons) <= NOTE_LIMIT and colons.endswith(RL_LINE)
    assert report_line(colons) == f"Report: [{REPORT}]({CONSOLE}run-report.md)"
    longer = note_text("failed: " + "e" * 520, REWARDS, COST, REPORT, "promoted", ":" * 250)
    assert len(longer) <= NOTE_LIMIT and longer.endswith(RL_LINE)
    assert report_line(longer) == "Report: on the RL post-training page"


def held_out_paragraph(text: str) -> str:
    return next(p for p in text.split("\n\n") if p.startswith("Held-out"))


def test_the_note_shows_the_held_out_table_where_it_fits_else_a_line_per_benchmark():
    """A failed run's short note has room for one benchmark's table; a verified one's links
    leave a line per benchmark, and a long verdict the verdict alone. Without held-out
    evaluation: none."""
    short = note_text("failed: gate", None, None, None, None, None, heldout(GSM8K))
    assert len(short) <= NOTE_LIMIT
    table = "| Benchmark | Items | Candidate (step 100) |"
    assert f"{verdict_line(heldout(GSM8K))}:\n\n{table}" in short
    assert "| gsm8k | 1,000 | 76.0% | 74.0% | 64.0% |" in short
    assert "step 100 is the best of them on these same items" in short
    report = heldout(GSM8K, MMLU_FELL)
    verified = note_text("succeeded", REWARDS, COST, REPORT, "promoted", RUN_ID, report)
    assert len(verified) <= NOTE_LIMIT and "| Benchmark" not in verified
    assert held_out_paragraph(verified).split("\n") == [
        "Held-out (95% level): step 100 better than the base model, not distinguishable from "
        "the champion; guard mmlu worse than the base model:",
        "- gsm8k: 76.0% on 1,000 items; champion 74.0% (not distinguishable, +2.0 points); "
        "base 64.0% (better, +12.0 points)",
        "- mmlu (guard): 62.0% on 500 items; champion 62.0% (not distinguishable, +0.0 points); "
        "base 68.0% (worse, -6.0 points)",
    ]
    assert verified.index("Promotion: promoted") < verified.index("Held-out")
    assert report_line(verified) == report_line(
        note_text("succeeded", REWARDS, COST, REPORT, "promoted", RUN_ID)
    )  # the links are kept whole: the held-out paragraph gave way first
    crowded = note_text("succeeded " + "x" * 300, REWARDS, COST, REPORT, "promoted", RUN_ID, report)
    assert len(crowded) <= NOTE_LIMIT
    assert held_out_paragraph(crowded) == verdict_line(report)
    plain = note_text("succeeded", REWARDS, COST, REPORT, "promoted", RUN_ID)
    assert note_text("succeeded", REWARDS, COST, REPORT, "promoted", RUN_ID, None) == plain
    assert "Held-out" not in plain
