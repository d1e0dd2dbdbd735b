"""A real fault as a user sees it: the real trainer's non-finite loss (Tunix's own
`Train step N training loss: nan`, from rewards that overflow GRPO's advantages) stops the run,
and the RL page names the rule, the step, the real evidence line and the checkpoint kept. The
screenshot is test-artifacts/ui-health-real.png."""

from __future__ import annotations

import pytest

from sandbox.harness import Workloads
from sandbox.real_trainer.process import RealTrainer
from tests.conftest import REPO
from tests.support.real_trainer import CONF
from tests.ui import synthetic
from tests.ui.chromium import chromium_path
from tests.ui.pages import health_rows, read_page
from tpu_rl.watch import health

pytestmark = pytest.mark.xdist_group("ui-browser")

ARTIFACTS = REPO / "test-artifacts"
NAN_AT = 12


@pytest.mark.skipif(
    chromium_path() is None, reason="Debian's chromium is not installed: make chromium"
)
def test_a_real_nan_on_the_page_names_the_rule_the_line_and_the_checkpoint_kept(
    sandbox, auth_token, ui_server, browser
):
    synthetic.clear_runs()
    trainer = RealTrainer(fault="overflow", fault_step=NAN_AT)
    result = sandbox.run({**CONF, "health_action": "stop"}, Workloads(real_trainer=trainer))
    assert result.state == "failed", result.why()
    rows, _ = read_page(browser, ui_server, auth_token)
    ARTIFACTS.mkdir(exist_ok=True)
    browser.screenshot(ARTIFACTS / "ui-health-real.png")
    assert len(rows) == 1
    healthy = result.xcoms["wait_for_rewards.anomaly"]["healthy_step"]
    rows = health_rows(browser)
    (row,) = [r for r in rows if r.startswith("training health:")]
    assert f"nonfinite_loss at step {NAN_AT}" in row, row
    assert f"Train step {NAN_AT} training loss: nan" in row, row  # the real trainer's own line
    assert f"/checkpoints/actor/{healthy}/" in row, row
    assert row.endswith(health.next_step({"rule": health.NONFINITE})), row  # what to do next
    (failed,) = [r for r in rows if r.startswith("failed at")]
    assert "Next: " in failed, failed
