"""The page and the trigger form as the UI tests drive them (not a test module: the tests of
tests/ui and tests/trainer import it): the runs' and the form's helpers in headless Chromium,
the RL page read back, the synthetic runs' names and the API's runs."""

from __future__ import annotations

import json
from typing import Any

import httpx
from fastapi.testclient import TestClient

from sandbox.paths import REPO
from tests.ui.chromium import Chromium
from tpu_rl.names import DAG_ID

SCREENSHOTS = REPO / "test-artifacts"
SCREENSHOT = REPO / "test-artifacts" / "ui.png"  # the RL page read_page leaves
# The fields the form marks required (a type without null: the settings without a default), as a
# user fills them.
REQUIRED = {
    "project": "my-tpu-project",
    "region": "us-east5",
    "zone": "us-east5-b",
    "cluster_name": "gemma4-rl",
    "gcs_bucket": "my-tpu-project-rl",
}


SET_VALUE = """(id, value) => {
  const el = document.getElementById(id);
  const proto = Object.getPrototypeOf(el);
  Object.getOwnPropertyDescriptor(proto, 'value').set.call(el, value);
  el.dispatchEvent(new Event('input', {bubbles: true}));
}"""


def serialize_dags() -> None:
    """What the DAG processor does: bundles, then every DAG of the bundle, into the DB."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.utils.session import create_session

    from sandbox.dagbags import bundle_dag_bag, sync_bag_to_db

    with create_session() as session:
        manager = DagBundlesManager()
        manager.sync_bundles_to_db(session=session)
        session.commit()
        for bundle in manager.get_all_dag_bundles():
            bundle.initialize()
            bag = bundle_dag_bag(bundle.path, bundle)
            assert not bag.import_errors, bag.import_errors
            sync_bag_to_db(bag, bundle.name, None, session=session)


def runs(base: str, token: str, dag_id: str = DAG_ID) -> list[dict]:
    """The DAG's newest runs, over REST (the session's DB may hold other tests' runs)."""
    response = httpx.get(
        f"{base}/api/v2/dags/{dag_id}/dagRuns",
        params={"order_by": "-id", "limit": 5},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    response.raise_for_status()
    return response.json()["dag_runs"]


def section_button(title: str) -> str:
    return (
        "[...document.querySelectorAll('button')]"
        f".find(b => b.textContent.trim().startsWith({json.dumps(title)}))"
    )


def click(browser: Chromium, element: str) -> None:
    """A real mouse click in the middle of the element the expression finds."""
    box = browser.evaluate(
        f"(() => {{ const el = {element}; el.scrollIntoView({{block: 'center'}});"
        " const r = el.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2];"
        " })()"
    )
    for kind in ("mousePressed", "mouseReleased"):
        browser.call(
            "Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1
        )


def set_field(browser: Chromium, name: str, value: str) -> None:
    browser.wait_for(f"!!document.getElementById('element_{name}')")
    browser.evaluate(f"({SET_VALUE})('element_{name}', {json.dumps(value)})")


def open_trigger_form(browser: Chromium, base: str, token: str, dag_id: str) -> None:
    """The DAG's page at 1280 x 1400, logged in, its trigger form open."""
    browser.call(
        "Emulation.setDeviceMetricsOverride",
        width=1280,
        height=1400,
        deviceScaleFactor=1,
        mobile=False,
    )
    browser.call("Network.setCookie", name="_token", value=token, domain="127.0.0.1", path="/")
    browser.call("Page.navigate", url=f"{base}/dags/{dag_id}")
    browser.wait_for("!!document.querySelector('[data-testid=trigger-dag-button]')")
    click(browser, "document.querySelector('[data-testid=trigger-dag-button]')")
    browser.wait_for("!!document.querySelector('[data-testid=trigger-dag-submit]')")


def run_id(i: int) -> str:
    return f"scheduled__synthetic-{i:04d}"


def open_page(browser: Chromium, base: str, token: str | None) -> str:
    """The page's state once its script is done, in a browser as new as a fresh profile."""
    browser.reset(base)
    if token:
        browser.call("Network.setCookie", name="_token", value=token, domain="127.0.0.1", path="/")
    browser.call("Page.navigate", url=f"{base}/tpu-rl/")
    return browser.wait_for("document.body && document.body.dataset.state")


def read_page(browser: Chromium, base: str, token: str) -> tuple[list[list[str]], dict[str, Any]]:
    """The table's cells and the chart's element counts once the page's script is done, at the
    1280 px a laptop gives it."""
    browser.call(
        "Emulation.setDeviceMetricsOverride",
        width=1280,
        height=900,
        deviceScaleFactor=1,
        mobile=False,
    )
    browser.call("Network.setCookie", name="_token", value=token, domain="127.0.0.1", path="/")
    browser.call("Page.navigate", url=f"{base}/tpu-rl/")
    state = browser.wait_for("document.body && document.body.dataset.state")
    status = browser.evaluate("document.getElementById('status').textContent")
    assert state == "ready", status
    rows = browser.evaluate(
        "[...document.querySelectorAll('#runs tbody tr.run')]"
        ".map(tr => [...tr.cells].map(td => td.textContent))"
    )
    chart = browser.evaluate(
        "({circles: document.querySelectorAll('#chart circle').length,"
        " lines: document.querySelectorAll('#chart polyline').length,"
        " width: document.getElementById('chart').getBoundingClientRect().width,"
        " yticks: [...document.querySelectorAll('#chart text.ytick')].map(t => t.textContent),"
        " xticks: [...document.querySelectorAll('#chart text.xtick')].map(t => t.textContent),"
        " reasons: [...document.querySelectorAll('#runs tr.reason')].map(t => t.textContent),"
        " status: document.getElementById('status').textContent,"
        " overflow: document.documentElement.scrollWidth"
        "   - document.documentElement.clientWidth,"
        " tableOverflow: document.querySelector('.table').scrollWidth"
        "   - document.querySelector('.table').clientWidth})"
    )
    browser.screenshot(SCREENSHOT)
    return rows, chart


def health_rows(browser: Chromium) -> list[str]:
    return browser.evaluate(
        "[...document.querySelectorAll('#runs tr.reason')].map(t => t.textContent)"
    )


def get_runs(client: TestClient, token: str, **params: int) -> list[dict]:
    response = client.get("/api/runs", params=params, cookies={"_token": token})
    assert response.status_code == 200, response.text
    return response.json()["runs"]


def set_conf(run_id: str, conf: dict) -> None:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import update

    with create_session() as session:
        session.execute(update(DagRun).where(DagRun.run_id == run_id).values(conf=conf))


def evaluation(step: int, corr: int, reward: float, attempt: int = 1) -> dict:
    return {"kind": "intermediate", "attempt": attempt, "step": step, "corr": corr,
            "total": 64, "accuracy": corr / 64 * 100, "partial_accuracy": 20.0 + corr,
            "format_accuracy": 80.0 + corr / 2, "mean_reward": reward}  # fmt: skip


REWARDS = {
    "pre": {
        "corr": 8,
        "total": 64,
        "accuracy": 12.5,
        "partial_accuracy": 14.0,
        "format_accuracy": 79.7,
        "mean_reward": 0.0821,
    },
    "intermediate": [
        evaluation(10, 10, 0.25),
        evaluation(20, 14, 0.31),
        evaluation(30, 11, 0.2),
        evaluation(40, 13, 0.25),
    ],
    "post": {
        "corr": 12,
        "total": 64,
        "accuracy": 18.75,
        "partial_accuracy": 20.3,
        "format_accuracy": 85.9,
        "mean_reward": 0.1234,
    },
}


def shown(browser: Chromium) -> dict:
    """What the estimate page shows once it answered."""
    browser.wait_for("document.body.dataset.state === 'ready'")
    return browser.evaluate(
        """({
      status: document.getElementById('status').textContent,
      errors: [...document.querySelectorAll('#errors:not([hidden]) li')].map(li => li.textContent),
      summary: document.querySelector('#estimate:not([hidden]) .summary')?.textContent ?? null,
      rows: [...document.querySelectorAll('#estimate:not([hidden]) tbody tr')]
        .map(tr => [...tr.cells].map(td => td.textContent)),
      address: window.location.search,
    })"""
    )
