"""The page in headless Chromium when there is little to show: one run, or no login at all, or
a run whose XCom it cannot read."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from tests.ui import synthetic
from tests.ui.chromium import chromium_path
from tests.ui.pages import open_page, run_id

pytestmark = pytest.mark.xdist_group("ui-browser")


@pytest.mark.skipif(
    chromium_path() is None, reason="Debian's chromium is not installed: make chromium"
)
def test_one_run_and_a_logged_out_visitor(airflow_db, auth_token, ui_server, browser):
    base = ui_server
    synthetic.add_runs(1)  # one run, still running: no rewards yet
    state = open_page(browser, base, auth_token)
    assert state == "ready"
    assert browser.evaluate("document.getElementById('status').textContent") == (
        "1 run, newest first."
    )
    assert browser.evaluate("document.getElementById('chart').textContent") == ("No rewards yet.")

    state = open_page(browser, base, None)
    assert state == "login"
    status = browser.evaluate("document.getElementById('status').textContent")
    # what to do, not only what is wrong: log in, and how to come back
    assert status.startswith("You are not logged in to Airflow (or your session ended)")
    assert "Log in to Airflow: Airflow brings you back here" in status
    assert "reload this page" in status
    assert browser.evaluate("getComputedStyle(document.getElementById('chart')).display") == "none"
    assert browser.evaluate("getComputedStyle(document.querySelector('.table')).display") == "none"
    browser.evaluate("document.querySelector('#status a').click()")
    # Airflow's login route hands over to the auth manager's login page, then back here
    browser.wait_for("location.pathname.startsWith('/auth/')")
    landed = urlparse(browser.evaluate("location.href"))
    assert parse_qs(landed.query)["next"] == [f"{base}/tpu-rl/"]


@pytest.mark.skipif(
    chromium_path() is None, reason="Debian's chromium is not installed: make chromium"
)
def test_a_run_with_a_malformed_xcom_shows_its_error_under_its_row(
    airflow_db, auth_token, ui_server, browser
):
    from airflow.utils.session import create_session

    synthetic.add_runs(3)
    with create_session() as session:  # the gate's verdict as a text, not an object
        synthetic.put_summary(session, run_id(1), "gate", gate="passed")
    state = open_page(browser, ui_server, auth_token)
    assert state == "ready"
    assert browser.evaluate("document.querySelectorAll('#runs tr.run').length") == 3
    errors = browser.evaluate(
        "[...document.querySelectorAll('#runs tr.error')]"
        ".map(t => [t.previousElementSibling.cells[0].textContent, t.textContent])"
    )
    assert errors == [
        [
            run_id(1),
            "data error: gate's gate: the value should be an object but is a text",
        ]
    ]


@pytest.mark.skipif(
    chromium_path() is None, reason="Debian's chromium is not installed: make chromium"
)
def test_a_run_without_a_summary_says_so_under_its_row(airflow_db, auth_token, ui_server, browser):
    """A run made before its tasks kept a summary (tpu_rl.run_summary) keeps its row, with a
    line under it saying there is none and where its results are."""
    from airflow.utils.session import create_session

    synthetic.add_runs(3)
    with create_session() as session:
        synthetic.drop_summary(session, run_id(0))
    assert open_page(browser, ui_server, auth_token) == "ready"
    assert browser.evaluate("document.querySelectorAll('#runs tr.run').length") == 3
    notes = browser.evaluate(
        "[...document.querySelectorAll('#runs tr.no-summary')]"
        ".map(t => [t.previousElementSibling.cells[0].textContent, t.textContent])"
    )
    assert notes == [
        [
            run_id(0),
            "no run summary: this run was made before its tasks kept one; its rewards and "
            "results are in its XComs and its note",
        ]
    ]
