"""Airflow's own trigger form in headless Chromium: only the required fields, then Trigger.

The DAGs are serialized into the test DB as the DAG processor would; the api-server (Airflow's
app factory) serves the real UI on loopback; the run the form creates is read back over REST.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx
import pytest

from tests.ui.chromium import Chromium, chromium_path
from tests.ui.pages import (
    REQUIRED,
    SCREENSHOTS,
    click,
    open_trigger_form,
    runs,
    section_button,
    serialize_dags,
    set_field,
)
from tpu_rl.names import DAG_ID, JANITOR_DAG_ID

pytestmark = pytest.mark.xdist_group("ui-browser")


def trigger_enabled(browser: Chromium) -> bool:
    return browser.evaluate("!document.querySelector('[data-testid=trigger-dag-submit]').disabled")


@dataclass
class Form:
    """One DAG's trigger form as a user fills it: per section, the fields to set (None: the
    section the form opens with; any other is clicked open first)."""

    dag_id: str
    fields: dict[str | None, dict[str, str]]
    screenshot: str


def open_sections(browser: Chromium) -> list[str]:
    """The titles of the form's expanded sections."""
    return browser.evaluate(
        "[...document.querySelectorAll('[role=dialog] button[aria-expanded=true]')]"
        ".map(b => b.textContent.trim())"
    )


def required_marks(browser: Chromium) -> list[str]:
    """The labels of the open section's fields that carry the required mark (a trailing *)."""
    return browser.evaluate(
        "[...document.querySelectorAll('[role=dialog] label')].map(l => l.textContent.trim())"
        ".filter(t => t.endsWith('*')).map(t => t.slice(0, -1).trim())"
    )


def fill_and_trigger(browser: Chromium, base: str, token: str, form: Form) -> dict:
    """Fill the form as a user would, screenshot it, press Trigger; what the form showed."""
    before = {r["dag_run_id"] for r in runs(base, token, form.dag_id)}
    seen = {}
    open_trigger_form(browser, base, token, form.dag_id)
    seen["enabled_before"] = trigger_enabled(browser)
    seen["open_at_start"] = open_sections(browser)
    seen["required_marks"] = required_marks(browser)
    for section, fields in form.fields.items():
        if section:
            click(browser, section_button(section))
        for name, value in fields.items():
            set_field(browser, name, value)
    time.sleep(0.5)
    seen["enabled_after"] = trigger_enabled(browser)
    seen["sections"] = browser.evaluate(
        "[...document.querySelectorAll('[role=dialog] button')].map(b => b.textContent.trim())"
    )
    browser.evaluate("window.scrollTo(0, 0)")
    browser.screenshot(SCREENSHOTS / form.screenshot)
    click(browser, "document.querySelector('[data-testid=trigger-dag-submit]')")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = [r for r in runs(base, token, form.dag_id) if r["dag_run_id"] not in before]
        if found:
            break
        time.sleep(0.2)
    seen["runs"] = found
    browser.screenshot(SCREENSHOTS / form.screenshot.replace(".png", "-triggered.png"))
    return seen


@pytest.mark.skipif(
    chromium_path() is None, reason="Debian's chromium is not installed: make chromium"
)
def test_the_trigger_forms_take_only_the_required_fields(
    airflow_db, auth_token, ui_server, browser
):
    serialize_dags()
    # the required fields are in the section the form opens with; "empty: no Kueue" must not
    # block the form
    main = Form(DAG_ID, {None: REQUIRED, "Google Cloud": {"kueue_queue": ""}}, "trigger-form.png")
    # a dry run needs no bucket
    janitor = Form(
        JANITOR_DAG_ID,
        {"What to sweep": {"project": REQUIRED["project"], "region": REQUIRED["region"]}},
        "janitor-form.png",
    )
    seen = fill_and_trigger(browser, ui_server, auth_token, main)
    browser.reset(ui_server)  # the second form in a browser as new as the first's
    swept = fill_and_trigger(browser, ui_server, auth_token, janitor)
    assert seen["enabled_before"] is False  # the required fields are empty
    assert seen["enabled_after"] is True, "the form still blocks Trigger"
    # the tutorial's settings open, and only the five without a default marked
    assert seen["open_at_start"] == ["Run Parameters"]
    assert seen["required_marks"] == ["Project", "Region", "Zone", "Cluster name", "GCS bucket"]
    sections = ["Run Parameters", "Google Cloud", "Model", "GRPO", "Run control"]
    assert [b for b in seen["sections"] if b in sections] == sections
    [run] = seen["runs"]
    conf = run["conf"]
    assert {k: conf[k] for k in REQUIRED} == REQUIRED
    assert conf["kueue_queue"] is None and conf["reservation"] == ""
    assert conf["num_batches"] == 50 and conf["cluster_mode"] == "create"
    assert (SCREENSHOTS / "trigger-form.png").read_bytes()[:4] == b"\x89PNG"

    assert (swept["enabled_before"], swept["enabled_after"]) == (False, True)
    sections = ["What to sweep", "How", "Destroying clusters"]
    assert [b for b in swept["sections"] if b in sections] == sections
    [sweep] = swept["runs"]
    assert sweep["conf"]["dry_run"] is True and sweep["conf"]["gcs_bucket"] == ""


def trigger(base: str, token: str, conf: dict) -> httpx.Response:
    """POST a run of the run DAG with `conf`, as the form does."""
    return httpx.post(
        f"{base}/api/v2/dags/{DAG_ID}/dagRuns",
        json={"logical_date": None, "conf": conf},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )


@pytest.mark.skipif(
    chromium_path() is None, reason="Debian's chromium is not installed: make chromium"
)
def test_a_mistake_is_refused_before_the_run_exists(airflow_db, auth_token, ui_server, browser):
    """0 training steps typed in the form stays 0 (no clamping) and Trigger shows
    Airflow's refusal, no run made; an unknown setting is refused by the API with the closest
    setting named; the TPU type field offers the catalogue's types."""
    serialize_dags()
    before = {r["dag_run_id"] for r in runs(ui_server, auth_token)}
    typo = trigger(ui_server, auth_token, {**REQUIRED, "num_batchs": 5})
    assert typo.status_code == 400, typo.text
    assert "num_batchs: unknown setting (did you mean num_batches?)" in typo.json()["detail"]
    too_big = trigger(ui_server, auth_token, {**REQUIRED, "cluster_nodepool_count": 65})
    assert too_big.status_code == 400 and "65 is greater than the maximum of 64" in too_big.text
    open_trigger_form(browser, ui_server, auth_token, DAG_ID)
    for name, value in REQUIRED.items():
        set_field(browser, name, value)
    steps = "document.getElementById('number-input:element_num_batches').querySelector('input')"
    click(browser, steps)
    browser.evaluate(f"{steps}.select()")
    browser.call("Input.insertText", text="0")  # typed, as a user does
    click(browser, "document.getElementById('element_project')")  # num_batches loses focus
    time.sleep(0.5)
    typed = browser.evaluate(f"{steps}.value")
    click(browser, "document.querySelector('[data-testid=trigger-dag-submit]')")
    browser.wait_for("document.body.innerText.includes('0 is less than the minimum of 1')")
    browser.evaluate(  # the refusal in view, where the form shows it
        "[...document.querySelectorAll('[role=dialog] *')].filter(e => e.children.length === 0"
        " && e.textContent.includes('less than the minimum')).pop()"
        ".scrollIntoView({block: 'center'})"
    )
    browser.screenshot(SCREENSHOTS / "trigger-form-refused.png")
    assert typed == "0"
    assert {r["dag_run_id"] for r in runs(ui_server, auth_token)} == before
    click(browser, section_button("Google Cloud"))
    browser.wait_for("!!document.getElementById('element_tpu_type')")
    offered = browser.evaluate(
        "[...document.getElementById('element_tpu_type').list.options].map(o => o.value)"
    )
    assert {"v6e-32", "v5p-8", "tpu7x-128"} <= set(offered)
