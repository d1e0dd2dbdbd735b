"""The page's evaluations per step in headless Chromium: a chart per metric of the picked run,
the exported step ringed. Synthetic runs: the page only reads what the tasks wrote."""

from __future__ import annotations

import pytest

from tests.conftest import REPO
from tests.ui import synthetic
from tests.ui.chromium import chromium_path
from tests.ui.pages import REWARDS, open_page, run_id

pytestmark = pytest.mark.xdist_group("ui-browser")

SCREENSHOT = REPO / "test-artifacts" / "ui-evaluations.png"


GATE = {
    "pre_mean_reward": 0.0821,
    "post_mean_reward": 0.25,
    "gain": 0.1679,
    "checkpoint": {"step": 40, "choice": "best", "final_step": 50, "reason": "best"},
}


@pytest.mark.skipif(
    chromium_path() is None, reason="Debian's chromium is not installed: make chromium"
)
def test_a_chart_per_metric_with_the_exported_step_ringed(
    airflow_db, auth_token, ui_server, browser
):
    from airflow.utils.session import create_session

    synthetic.add_runs(3)  # run 2 is still running: no evaluations
    with create_session() as session:
        synthetic.put_summary(session, run_id(1), "wait_for_rewards", rewards=REWARDS)
        synthetic.put_summary(session, run_id(1), "gate", gate=GATE)
        synthetic.put_summary(session, run_id(1), "export", checkpoint_step=40)
    assert open_page(browser, ui_server, auth_token) == "ready"
    options = browser.evaluate(
        "[...document.querySelectorAll('#eval-run option')].map(o => o.value)"
    )
    assert options == [run_id(1), run_id(0)]  # newest first, runs with evaluations only
    charts = browser.evaluate(
        "[...document.querySelectorAll('#evals svg.eval-chart')].map(svg => ({"
        " metric: svg.dataset.metric,"
        " dots: svg.querySelectorAll('circle:not(.chosen)').length,"
        " ringed: [...svg.querySelectorAll('circle.chosen')].map(c => c.nextElementSibling"
        "   .textContent),"
        " xticks: [...svg.querySelectorAll('text.xtick')].map(t => t.textContent)}))"
    )
    assert [c["metric"] for c in charts] == [
        "accuracy",
        "partial_accuracy",
        "format_accuracy",
        "mean_reward",
    ]
    for chart in charts:  # pre (0), 10..40, post (50)
        assert chart["dots"] == 6 and chart["xticks"] == ["0", "50"], chart
        (ringed,) = chart["ringed"]
        assert ringed.startswith("step 40 (intermediate)"), ringed
    note = browser.evaluate("document.querySelector('.eval-note').textContent")
    assert note == "Exported: step 40 (ringed)."
    overflow = browser.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow == 0
    browser.evaluate("document.querySelector('.evaluations').scrollIntoView()")
    browser.screenshot(SCREENSHOT)
    assert SCREENSHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the older run (no choice recorded, post without a step): its Pre, intermediate... none
    browser.evaluate(
        "const s = document.getElementById('eval-run'); s.value = s.options[1].value;"
        " s.dispatchEvent(new Event('change'))"
    )
    assert browser.evaluate("document.querySelector('.eval-note').textContent") == (
        "Nothing exported."
    )
