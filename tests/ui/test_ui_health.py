"""A run the training watchdog stopped, as a user sees it on the RL page: the rule,
the step, the evidence and the checkpoint kept, beside a run that exported that checkpoint
(health_action=export_healthy). The screenshot is test-artifacts/ui-health.png; the exported
run's report is written beside it (test-artifacts/ui-health-report.md)."""

from __future__ import annotations

import logging
import re

import pytest

from sandbox.harness import SETTINGS, Sandbox, Workloads, logged_note
from sandbox.training_curve import TrainingFaults
from tests.conftest import REPO
from tests.ui import synthetic
from tests.ui.chromium import chromium_path
from tests.ui.pages import health_rows, read_page
from tpu_rl.watch import health

pytestmark = pytest.mark.xdist_group("ui-browser")

ARTIFACTS = REPO / "test-artifacts"
HEALTH = {**SETTINGS, "num_batches": 100, "checkpoint_period": 10}
NAN_AT = 35


@pytest.mark.skipif(
    chromium_path() is None, reason="Debian's chromium is not installed: make chromium"
)
def test_a_nan_run_on_the_page_names_the_rule_the_step_and_the_checkpoint_kept(
    airflow_db, auth_token, ui_server, browser, tmp_path, caplog
):
    caplog.set_level(logging.INFO, logger="tpu_rl")
    synthetic.clear_runs()
    faults = Workloads(train_faults=TrainingFaults(nan_at_step=NAN_AT))
    with Sandbox(tmp_path).up() as box:
        stopped = box.run({**HEALTH, "health_action": "stop"}, faults)
        exported = box.run(
            {**HEALTH, "health_action": "export_healthy", "min_reward_gain": -100.0}, faults
        )
        export = exported.xcoms["verify.return_value"]
        report = exported.gcs.read(f"{export}run-report.md").decode()
    assert stopped.state == "failed" and exported.state == "success", exported.why()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "ui-health-report.md").write_text(report)
    (ARTIFACTS / "ui-health-note.md").write_text(logged_note(caplog.records))
    rows, _ = read_page(browser, ui_server, auth_token)
    browser.screenshot(ARTIFACTS / "ui-health.png")
    assert len(rows) == 2
    # each run's health row names the rule, the evidence, what it kept and what to do next;
    # the stopped run's failure row, the rule and what to do next
    reasons = health_rows(browser)
    watched = [row for row in reasons if row.startswith("training health:")]
    failed = [row for row in reasons if row.startswith("failed at")]
    assert len(watched) == 2 and len(failed) == 1, reasons
    for row in watched:
        assert f"nonfinite_loss at step {NAN_AT}" in row, row
        assert f"Train step {NAN_AT} training loss: nan" in row, row  # the evidence line
        assert "/checkpoints/actor/30/" in row, row
        assert row.endswith(health.next_step({"rule": "nonfinite_loss"})), row
    assert {"(health_action=stop)", "(health_action=export_healthy)"} == {
        re.search(r"\(health_action=\w+\)", row).group(0) for row in watched
    }
    assert f"nonfinite_loss at step {NAN_AT}" in failed[0] and "Next: " in failed[0], failed
    note = (ARTIFACTS / "ui-health-note.md").read_text()
    assert note.endswith("All runs: [RL post-training page](/plugin/rl-post-training)"), note
    assert f"nonfinite_loss at step {NAN_AT}" in report, report  # the first attempt's end
