"""The estimate page as the place to fill in a run's settings, in headless
Chromium: the estimate follows what is typed (no button), an answer to older settings never
replaces a newer one, a problem disables the trigger button, and the button triggers the run
through Airflow's REST API with the session the user has; Airflow's refusals are said in words.
Screenshots: test-artifacts/estimate-live*.png, test-artifacts/estimate-triggered.png.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlparse

import pytest

from tests.ui.chromium import Chromium, chromium_path
from tests.ui.pages import REQUIRED, SCREENSHOTS, click, runs, serialize_dags, shown
from tpu_rl.names import DAG_ID
from tpu_rl.settings.params import default_settings, specs
from tpu_rl.ui.estimate import settings_estimate

pytestmark = [
    pytest.mark.xdist_group("ui-browser"),
    pytest.mark.skipif(
        chromium_path() is None, reason="Debian's chromium is not installed: make chromium"
    ),
]

PAGE = Path(__file__).parents[2] / "plugins/tpu_rl/ui/static/estimate.html"
# What the form's link holds (its defaults), filled in as a person would before estimating
SETTINGS = {
    **vars(default_settings()),
    **REQUIRED,
    "capacity": "spot",
    "reservation": "",
    "num_batches": 100,
}
TEXTAREA = "document.getElementById('conf')"
BUTTON = "document.getElementById('trigger')"
# Counts the page's requests to api/estimate; one whose settings hold `slow` is answered late.
SLOW_ESTIMATES = """(slow => {
  const original = window.fetch;
  window.estimates = 0;
  window.fetch = (url, init) => {
    if (!String(url).endsWith('api/estimate')) return original(url, init);
    window.estimates += 1;
    if (!init.body.includes(slow)) return original(url, init);
    return new Promise(done => setTimeout(done, 1500))
      .then(() => original(url, init))
      .finally(() => { window.slowAnswered = true; });
  };
})"""
# Airflow's answer to the trigger request, faked with `status` and `body`.
REFUSED = """((status, body) => {
  const original = window.fetch;
  window.fetch = (url, init) => String(url).endsWith('/dagRuns')
    ? Promise.resolve(new Response(JSON.stringify(body), {status}))
    : original(url, init);
})"""


def open_page(browser: Chromium, base: str, token: str, settings: dict) -> dict:
    """The page from the address the form's link makes, logged in, once it answered."""
    browser.call("Network.setCookie", name="_token", value=token, domain="127.0.0.1", path="/")
    conf = quote(json.dumps(settings, separators=(",", ":")))
    browser.call("Page.navigate", url=f"{base}/tpu-rl/estimate?conf={conf}")
    return shown(browser)


def type_into(browser: Chromium, element: str, text: str) -> None:
    """Typed as a person types: focus, then one key at a time (whatever is selected replaced)."""
    browser.evaluate(f"{element}.focus()")
    for letter in text:
        browser.call("Input.insertText", text=letter)


def select_in_textarea(browser: Chromium, pattern: str) -> None:
    """Select the first match of the regular expression's group 1 in the textarea's text."""
    browser.evaluate(
        f"""(() => {{
      const area = {TEXTAREA};
      const match = new RegExp({json.dumps(pattern)}).exec(area.value);
      const start = match.index + match[0].indexOf(match[1]);
      area.focus();
      area.setSelectionRange(start, start + match[1].length);
    }})()"""
    )


def table(settings: dict) -> tuple[str, list[list[str]]]:
    """The summary and rows api/estimate answers for the settings, as the page shows them."""
    estimate = settings_estimate(json.dumps(settings))["estimate"]
    return f"{estimate['summary']}:", [list(row) for row in estimate["rows"]]


def field(name: str) -> str:
    return f"document.querySelector('[data-setting={name}]')"


def button_state(browser: Chromium) -> list:
    """Whether the trigger button is disabled, and the note beside it."""
    return browser.evaluate(
        f"[{BUTTON}.disabled, document.getElementById('trigger-note').textContent]"
    )


def test_the_estimate_follows_typing_and_the_run_is_triggered_from_the_page(
    airflow_db, auth_token, ui_server, browser
):
    serialize_dags()
    page = open_page(browser, ui_server, auth_token, SETTINGS)
    assert page["errors"] == [] and page["status"] == "Valid settings."
    assert (page["summary"], page["rows"]) == table(SETTINGS)
    assert "; 100 steps; us-east5; about " in page["summary"]
    assert button_state(browser) == [False, "Starts the run now, with these settings."]
    assert browser.evaluate(f"{field('num_batches')}.value") == "100"

    # 100 -> 300 in the steps field, a key at a time, the slow answer to 1 first: each answer
    # comes after a pause in typing, and the newest settings' answer stays
    browser.evaluate(f"({SLOW_ESTIMATES})('\"num_batches\": 1,')")
    browser.evaluate(f"{field('num_batches')}.select()")
    type_into(browser, field("num_batches"), "1")
    browser.wait_for("window.estimates === 1")  # the pause: asked for, answered in 1.5 s
    browser.evaluate(f"{field('num_batches')}.select()")
    type_into(browser, field("num_batches"), "300")
    browser.wait_for("document.querySelector('#estimate .summary').textContent.includes('300')")
    browser.wait_for("window.slowAnswered")
    time.sleep(0.2)  # the stale answer's turn to be shown, if the page showed it
    page = shown(browser)
    assert (page["summary"], page["rows"]) == table({**SETTINGS, "num_batches": 300})
    assert "; 300 steps; us-east5; about " in page["summary"]
    # three keys typed quickly: fewer estimates than keys (the first answered late, apart)
    assert browser.evaluate("window.estimates") < 1 + 3
    assert json.loads(browser.evaluate(f"{TEXTAREA}.value"))["num_batches"] == 300
    assert json.loads(parse_qs(page["address"][1:])["conf"][0])["num_batches"] == 300
    browser.screenshot(SCREENSHOTS / "estimate-live.png")

    # an invalid value typed into the JSON: the problem at once, no figures, no trigger
    select_in_textarea(browser, r'"num_batches": (\d+)')
    type_into(browser, TEXTAREA, "0")
    browser.wait_for(
        "[...document.querySelectorAll('#errors li')].some(li => li.textContent"
        ".startsWith('num_batches:'))"
    )
    page = shown(browser)
    assert page["status"] == "No estimate until num_batches is valid: the figures come from them."
    assert page["rows"] == [] and page["summary"] is None
    assert button_state(browser) == [True, "Possible once no setting is invalid."]
    assert browser.evaluate(f"{field('num_batches')}.value") == "0"
    assert browser.evaluate(f"{field('num_batches')}.getAttribute('aria-invalid')") == "true"
    browser.screenshot(SCREENSHOTS / "estimate-live-problem.png")

    # fixed in the JSON, then a field: trigger, as the user logged in
    select_in_textarea(browser, r'"num_batches": (\d+)')
    type_into(browser, TEXTAREA, "300")
    browser.evaluate(f"{field('cluster_name')}.select()")
    type_into(browser, field("cluster_name"), "rl-live")
    browser.wait_for(f"!{BUTTON}.disabled")
    page = shown(browser)
    sent = json.loads(browser.evaluate(f"{TEXTAREA}.value"))
    assert sent == {**SETTINGS, "num_batches": 300, "cluster_name": "rl-live"}
    assert page["errors"] == [] and (page["summary"], page["rows"]) == table(sent)
    click(browser, BUTTON)
    run_link = "document.querySelector('#triggered a')"
    run_id = browser.wait_for(f"{run_link}?.textContent")
    browser.wait_for("document.getElementById('triggered').textContent.includes('paused')")
    browser.screenshot(SCREENSHOTS / "estimate-triggered.png")
    text = browser.evaluate("document.getElementById('triggered').textContent")
    assert text.startswith(f"Triggered: {run_id} (its page in Airflow).")
    assert f"The DAG {DAG_ID} is paused: the run waits, queued, until it is unpaused" in text
    href = browser.evaluate(f"{run_link}.href")
    assert href == f"{ui_server}/dags/{DAG_ID}/runs/{quote(run_id, safe='')}"
    assert button_state(browser) == [True, "Triggered: change the settings to trigger another run."]
    [run] = [r for r in runs(ui_server, auth_token) if r["dag_run_id"] == run_id]
    assert run["conf"] == sent and run["run_type"] == "manual" and run["logical_date"] is None
    assert run["triggering_user_name"] == "admin"
    # the link opens the run in Airflow's UI
    click(browser, run_link)
    browser.wait_for(f"document.body.innerText.includes({json.dumps(run_id)})")
    assert unquote(urlparse(browser.evaluate("location.href")).path).endswith(run_id)


def test_airflows_refusals_say_what_to_do(airflow_db, auth_token, ui_server, browser):
    """A viewer may estimate but not trigger (403, Airflow's check); a session that ended
    (401) and the answers Airflow gives a request it cannot take (409, 422) each say what to
    do. The run's settings stay on the page (and in its address) every time."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    serialize_dags()
    before = {r["dag_run_id"] for r in runs(ui_server, auth_token)}
    viewer = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="ann", role="viewer"))
    page = open_page(browser, ui_server, viewer, SETTINGS)
    assert page["errors"] == [] and page["rows"], page
    result = "document.getElementById('triggered')"

    def trigger() -> str:
        browser.evaluate(f"{result}.textContent = ''")
        click(browser, BUTTON)
        return browser.wait_for(f"{result}.textContent")

    said = trigger()
    browser.screenshot(SCREENSHOTS / "estimate-trigger-refused.png")
    assert said.startswith(f"Not triggered: your Airflow user may not trigger {DAG_ID} ("), said
    assert "role allowed to create its DAG runs (e.g. User or Op): ask an Airflow admin" in said
    assert browser.evaluate(f"{result}.className") == "refused"

    browser.call("Network.clearBrowserCookies")  # the session ended
    said = trigger()
    assert said.startswith("Not triggered: you are not logged in to Airflow"), said
    assert said.endswith("press Trigger this run again.")
    login = urlparse(browser.evaluate(f"{result}.querySelector('a').href"))
    assert login.path == "/api/v2/auth/login"
    assert "num_batches" in unquote(login.query)  # back here with the settings

    for status, body, words in [
        (409, {"detail": "Unique constraint violation"}, "already has a run with the same run id"),
        (
            422,
            {"detail": [{"loc": ["body", "logical_date"], "msg": "Field required"}]},
            "(Airflow: body.logical_date: Field required): this page does not fit",
        ),
    ]:
        browser.evaluate(f"({REFUSED})({status}, {json.dumps(body)})")
        said = trigger()
        assert words in said, said
    assert {r["dag_run_id"] for r in runs(ui_server, auth_token)} == before


def test_the_fields_are_settings_of_the_form_under_their_titles():
    """Each field of the page names a setting the trigger form has, with the form's title."""
    labels = re.findall(
        r"<label>([^<]+) <code>(\w+)</code>\s*<input data-setting=\"(\w+)\"", PAGE.read_text()
    )
    assert len(labels) >= 10
    for title, name, setting in labels:
        assert name == setting and specs()[setting]["title"] == title
