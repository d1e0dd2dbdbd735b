"""The estimate page in headless Chromium, as a person reaches it from Airflow's trigger form:
fill non-default settings, follow the form's "Estimate these settings" link,
paste the form's Configuration JSON, read the table (estimated as pasted); then the page from an
address holding settings with many problems. Screenshots: test-artifacts/estimate-page*.png.
"""

from __future__ import annotations

import base64
import json
import time
from urllib.parse import parse_qs, quote, urlparse

import pytest

from tests.ui.chromium import Chromium, chromium_path
from tests.ui.pages import (
    REQUIRED,
    SCREENSHOTS,
    click,
    open_trigger_form,
    section_button,
    serialize_dags,
    set_field,
    shown,
)
from tpu_rl.names import DAG_ID

pytestmark = [
    pytest.mark.xdist_group("ui-browser"),
    pytest.mark.skipif(
        chromium_path() is None, reason="Debian's chromium is not installed: make chromium"
    ),
]

# Non-default settings, as a person types them into the form (per section; None: the open one)
FILLED = {
    None: {**REQUIRED, "reservation": "my-reservation", "num_batches": "200"},
    # a setting of another section (one slice: MaxText 0.2.4 meshes no trainer and sampler
    # slices, cell_rules)
    "Google Cloud": {"namespace": "rl-team"},
}
# Settings with problems, in the page's address (?conf=): the figures' own settings among them
BROKEN = {
    "project": "",
    "num_batches": 0,
    "topology": "4x4",
    "learning_rate": -0.1,
    "learnin_rate": 1e-6,
    "gcs_bucket": "gs://my-bucket",
}
CTRL = 2  # DevTools' modifier bit for Ctrl


def fill(browser: Chromium, name: str, value: str) -> None:
    """A text field as test_trigger_form sets it; a number field (Chakra's number input, no
    element_<name> id) typed into as a person does: focus, select, type, leave it."""
    number = f"document.querySelector('input[name=element_{name}]')"
    if not browser.evaluate(f"!!{number}"):
        set_field(browser, name, value)
        return
    browser.evaluate(f"{number}.focus(); {number}.select()")
    browser.call("Input.insertText", text=value)
    browser.evaluate(f"{number}.blur()")


def key(browser: Chromium, letter: str, command: str | None = None) -> None:
    """Ctrl+`letter` pressed and released. A synthetic key event does not run the browser's own
    action for it, so a copy or paste names it (`command`, DevTools' Input.dispatchKeyEvent)."""
    for kind in ("keyDown", "keyUp"):
        browser.call(
            "Input.dispatchKeyEvent",
            type=kind,
            key=letter,
            code=f"Key{letter.upper()}",
            windowsVirtualKeyCode=ord(letter.upper()),
            modifiers=CTRL,
            commands=[command] if command and kind == "keyDown" else [],
        )


def focus_editor(browser: Chromium, editor: str) -> None:
    """Click into the editor once the accordion that holds it has stopped moving (a click
    during its animation lands beside it)."""
    box = f"JSON.stringify({editor}.getBoundingClientRect())"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        before = browser.evaluate(box)
        time.sleep(0.3)
        if browser.evaluate(box) == before:
            break
    click(browser, editor)
    browser.wait_for("document.activeElement.classList.contains('native-edit-context')")


def test_the_forms_settings_estimated_on_the_estimate_page(
    airflow_db, auth_token, ui_server, browser
):
    serialize_dags()
    open_trigger_form(browser, ui_server, auth_token, DAG_ID)
    for name, value in FILLED[None].items():
        fill(browser, name, value)
    # the capacity field's help, in the section the form opens with (opening another closes
    # it): the defaults' table, then the link, opening a new tab
    link = (
        "[...document.querySelectorAll('[role=dialog] a')]"
        ".find(a => a.textContent === 'Estimate these settings')"
    )
    href, target = browser.evaluate(f"[{link}.href, {link}.target]")
    assert href.startswith(f"{ui_server}/tpu-rl/estimate?conf=") and target == "_blank"
    href = href.split("?")[0]  # the page as a person pastes into it (the defaults: below)
    browser.evaluate(f"{link}.scrollIntoView({{block: 'center'}})")
    # the window as it is (a whole-page capture would lay the dialog out again, scrolled back)
    shot = browser.call("Page.captureScreenshot", format="png")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)  # a clean clone has no test-artifacts/
    (SCREENSHOTS / "estimate-form-link.png").write_bytes(base64.b64decode(shot["data"]))
    click(browser, section_button("Google Cloud"))
    for name, value in FILLED["Google Cloud"].items():
        fill(browser, name, value)
    time.sleep(0.5)
    # Advanced Options > Configuration JSON (the dialog's last editor), copied as a person does
    click(browser, section_button("Advanced Options"))
    editor = "[...document.querySelectorAll('[data-testid=config-form] .view-lines')].at(-1)"
    browser.wait_for(f"{editor}?.textContent.includes('my-reservation')")
    focus_editor(browser, editor)
    key(browser, "a")
    key(browser, "c", "copy")
    # the link's page (a new tab for a person: here the one page goes there), pasted into
    browser.call("Page.navigate", url=href)
    browser.wait_for("!!document.getElementById('conf')")
    click(browser, "document.getElementById('conf')")
    key(browser, "v", "paste")
    pasted = json.loads(browser.wait_for("document.getElementById('conf').value"))
    assert (pasted["num_batches"], pasted["namespace"]) == (200, "rl-team")
    page = shown(browser)  # estimated as pasted: no button to press
    browser.screenshot(SCREENSHOTS / "estimate-page.png")
    assert page["errors"] == [] and page["status"] == "Valid settings."
    # a v6e-32 slice: 32 chips; 30 + 30 + 5 + 200 + 20 + 10 = 295 min (as the API test)
    assert page["summary"] == "1 x v6e-32, 32 chips in all; 200 steps; us-east5; about 4.9 h:"
    assert [row[0] for row in page["rows"]] == ["reservation", "calendar", "flex_start", "spot"]
    assert page["rows"][3] == ["spot", "4.9 h", "157.3", "$212.40"]
    assert page["address"].startswith("?conf=")  # the settings' own address, to share

    # settings with many problems, from the address: every one at once, no figures
    browser.call("Page.navigate", url=f"{href}?conf={quote(json.dumps(BROKEN))}")
    page = shown(browser)
    browser.screenshot(SCREENSHOTS / "estimate-page-errors.png")
    assert page["errors"][0] == "learnin_rate: unknown setting (did you mean learning_rate?)"
    assert "learning_rate: must be in (0, 1), got -0.1" in page["errors"]
    assert len(page["errors"]) >= 8, page["errors"]
    assert page["status"].startswith("No estimate until num_batches, topology are valid")
    assert page["rows"] == [] and page["summary"] is None


def test_one_click_from_the_form_estimates_its_defaults_and_a_visitor_is_told_to_log_in(
    airflow_db, auth_token, ui_server, browser
):
    """The form's link opens the estimate of the form's defaults (?conf=), ready to edit; the
    same address without a session says what to do: log in, as whom, and come back."""
    serialize_dags()
    open_trigger_form(browser, ui_server, auth_token, DAG_ID)
    link = (
        "[...document.querySelectorAll('[role=dialog] a')]"
        ".find(a => a.textContent === 'Estimate these settings').href"
    )
    href = browser.wait_for(link)
    browser.call("Page.navigate", url=href)
    page = shown(browser)
    browser.screenshot(SCREENSHOTS / "estimate-page-defaults.png")
    typed = json.loads(browser.evaluate("document.getElementById('conf').value"))
    assert typed["model_name"] == "gemma4-26b" and "project" in typed
    assert page["summary"] is not None and len(page["rows"]) == 4, page

    browser.reset(ui_server)  # no session
    browser.call("Page.navigate", url=href)
    answered = "document.body.dataset.state !== 'loading' && document.body.dataset.state"
    assert browser.wait_for(answered) == "login"
    browser.screenshot(SCREENSHOTS / "estimate-page-logged-out.png")
    status = browser.evaluate("document.getElementById('status').textContent")
    assert status.startswith("You are not logged in to Airflow"), status
    assert "Viewer" in status and "reload this page" in status
    login = browser.evaluate("document.querySelector('#status a').href")
    assert urlparse(login).path == "/api/v2/auth/login"
    assert parse_qs(urlparse(login).query)["next"][0].startswith(f"{ui_server}/tpu-rl/estimate?")
