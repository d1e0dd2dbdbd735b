"""The provenance view on the RL page, from two whole sandbox runs of one deployment that
registers in Vertex AI (the sandbox's Model Registry fake): the first, approval=none without
held-out evaluation, becomes the first champion (version 1); the second, with held-out evaluation,
beats it on the held-out items and replaces it (version 2). Its "provenance" button shows its
chain, base model to registry version, read from its XComs and the champion record in the
sandbox's GCS; the first's says the champion is now the second's, one click from its chain.
The screenshot is test-artifacts/provenance-view.png (docs/images/provenance-view.png is a
copy). Synthetic runs whose records are missing or of the wrong shape: what could not be read is
said, never guessed."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from typing import Any
from unittest import mock
from urllib.parse import quote

import httpx
import pytest

from sandbox.harness import HELDOUT, SETTINGS, Sandbox, Workloads
from sandbox.heldout_eval import HeldoutWorkload
from sandbox.vertex_api import VertexRegistryFake
from sandbox.workloads import EvalResult
from tests.support.lineage import CHAIN
from tests.support.promotion import IMAGE, MODEL_ID
from tests.ui import synthetic
from tests.ui.chromium import Chromium, chromium_path
from tests.ui.pages import SCREENSHOTS, click, open_page
from tpu_rl.layout import RunLayout
from tpu_rl.lineage import names
from tpu_rl.names import DAG_ID, UI_PREFIX
from tpu_rl.settings.run_settings import load_settings

pytestmark = pytest.mark.xdist_group("ui-browser")

DEPLOYMENT = "provenance-ui"
SCREENSHOT = SCREENSHOTS / "provenance-view.png"
# the champion's own trainer evaluation, as evaluate_champion scores it on the second run
CHAMPION_SCORES = EvalResult(corr=6, mean_reward=0.05)
CONF = {**SETTINGS, **HELDOUT}
# steps 30 and 40 are scored; 30 answers 88% of GSM8K, the champion 78%, the base model 70%
SCORES = HeldoutWorkload(per_step={30: {"gsm8k": 0.88}})
BUCKET = SETTINGS["gcs_bucket"]
VIEW = "document.getElementById('provenance-view')"
VERSIONS = f"projects/{SETTINGS['project']}/locations/{SETTINGS['region']}/models/{MODEL_ID}@"


def provenance(base: str, token: str, run_id: str) -> dict[str, Any]:
    """The page's request, through the api-server's mount."""
    response = httpx.get(
        f"{base}{UI_PREFIX}/api/provenance",
        params={"run_id": run_id},
        cookies={"_token": token},
        timeout=60,
    )
    assert response.status_code == 200, response.text[:500]
    return response.json()


@pytest.fixture
def registry() -> Iterator[VertexRegistryFake]:
    """Vertex AI Model Registry's REST API on loopback (sandbox/vertex_api.py)."""
    fake = VertexRegistryFake()
    yield fake
    fake.stop()


@pytest.mark.skipif(
    chromium_path() is None, reason="Debian's chromium is not installed: make chromium"
)
def test_a_champions_provenance_is_one_click_from_its_run(
    airflow_db, auth_token, ui_server, browser, tmp_path, registry
):
    synthetic.clear_runs()
    deployer = {
        "TPU_RL_DEPLOYMENT_ID": DEPLOYMENT,
        "TPU_RL_VERTEX_REGISTRY": MODEL_ID,
        "TPU_RL_VERTEX_SERVING_IMAGE": IMAGE,
    }
    with Sandbox(tmp_path).up(env=deployer) as box:
        # the sandbox's Google APIs, and the registry's regional endpoint beside them
        endpoints = json.loads(os.environ["TPU_RL_API_ENDPOINTS"])
        endpoints |= registry.endpoint_for(SETTINGS["region"])
        with mock.patch.dict(os.environ, {"TPU_RL_API_ENDPOINTS": json.dumps(endpoints)}):
            first = box.run(SETTINGS, Workloads())
            second = box.run(CONF, Workloads(champion=CHAMPION_SCORES, heldout=SCORES))
        assert (first.state, second.state) == ("success", "success"), second.why()
        assert second.xcoms["promote.return_value"]["run_id"] == second.run_id
        # read while the sandbox's GCS holds the champion record
        chain = provenance(ui_server, auth_token, second.run_id)
        earlier = provenance(ui_server, auth_token, first.run_id)
        check_chain(chain, second.run_id)
        check_first(earlier, first.run_id, second.run_id)
        check_page(browser, ui_server, auth_token, first.run_id, second.run_id)


def check_chain(view: dict[str, Any], run_id: str) -> None:
    """The second run's eight links: each dataset as its lineage names it, each text what its
    records say."""
    run = RunLayout(load_settings(CONF), run_id, DEPLOYMENT)
    assert view["error"] is None, view["error"]
    links = view["links"]
    assert [link["label"] for link in links] == CHAIN
    assert [link["dataset"] for link in links] == [
        {"namespace": "https://huggingface.co", "name": "google/gemma-4-26b-a4b-it@main"},
        {"namespace": "https://huggingface.co", "name": "datasets/openai/gsm8k@main"},
        None,
        names.checkpoint_step(run, 30).as_dict(),
        names.heldout_results(run).as_dict(),
        names.export_folder(run).as_dict(),
        {"namespace": f"gs://{BUCKET}", "name": f"gemma4-26b/champions/{DEPLOYMENT}.json"},
        {"namespace": "https://aiplatform.googleapis.com", "name": f"{VERSIONS}2"},
    ]
    texts = [link["text"] for link in links]
    assert texts[:4] == ["google/gemma-4-26b-a4b-it@main", "openai/gsm8k@main", run_id, "step 30"]
    assert texts[4].startswith("Held-out (95% level): step 30 better than the base model")
    assert texts[5:] == [run.export_dir, "approval=none: promoted by the rule", f"{VERSIONS}2"]
    assert links[3]["detail"].startswith(f"{run.checkpoints_dir}30/; ")
    # the sandbox's evaluator: each item answered by a fixed draw (sandbox/heldout_eval.py)
    assert links[4]["detail"] == (
        "gsm8k: 88.5% on 1,319 items; champion 79.9% (better, +8.6 points); base 71.9% (better, "
        "+16.6 points); arc_easy (guard): 56.5% on 200 items; champion 58.0% (not "
        "distinguishable, -1.5 points); base 59.5% (not distinguishable, -3.0 points)"
    )
    assert links[6]["detail"].startswith("beats the champion from run ")
    assert links[2]["url"] == f"dags/tpu_rl_post_training/runs/{quote(run_id, safe='')}"
    assert not any(link["missing"] for link in links)
    # the record reads back: step 30's metrics are an Intermediate Eval line's, whose kind and
    # time (text) promote leaves out of the record's numbers
    champion = view["champion"]
    assert (champion["run_id"], champion["current"]) == (run_id, True), champion["text"]
    assert champion["text"].startswith(
        f"This run's export is the deployment {DEPLOYMENT}'s champion for gemma4-26b (promoted "
    )


def check_first(view: dict[str, Any], run_id: str, champion_run: str) -> None:
    """The first champion's chain: the trainer's evaluation, the rule's promotion over no
    champion, version 1; the record now names the second run's export."""
    by_label = {link["label"]: link for link in view["links"]}
    assert list(by_label) == CHAIN and view["error"] is None
    evaluation = by_label["evaluation"]
    assert (evaluation["task"], evaluation["dataset"]) == ("wait_for_rewards", None)
    assert evaluation["text"].startswith("the trainer's evaluation of step ")
    assert by_label["approval"]["detail"].startswith(
        "no champion yet: this run's export becomes the first candidate; promoted at "
    )
    assert by_label["registry version"]["text"] == f"{VERSIONS}1"
    assert view["champion"]["run_id"] == champion_run and not view["champion"]["current"]
    assert f"is run {champion_run}'s export (promoted at " in view["champion"]["text"]
    assert "; this run's export was promoted at " in view["champion"]["text"]


def show(browser: Chromium, where: str, run_id: str) -> str:
    """Click the "provenance" button of `run_id` under the `where` selector; the view's
    status line once it is drawn."""
    label = json.dumps(f"provenance of {run_id}'s export")
    buttons = f"[...document.querySelectorAll('{where} button.provenance-button')]"
    click(browser, f"{buttons}.find(b => b.getAttribute('aria-label') === {label})")
    title = json.dumps(f"Provenance of {run_id}'s export")
    browser.wait_for(
        f"document.getElementById('provenance-title').textContent === {title}"
        f" && {VIEW}.dataset.state !== 'loading'"
    )
    status = browser.evaluate("document.getElementById('provenance-status').textContent")
    assert browser.evaluate(f"{VIEW}.dataset.state") == "ready", status
    return status


def check_page(browser: Chromium, base: str, token: str, first: str, run_id: str) -> None:
    """One click on a run's "provenance" button shows its chain; from the first champion's,
    one more on the champion's line shows the current champion's, a row per link."""
    size = {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}
    browser.call("Emulation.setDeviceMetricsOverride", **size)
    assert open_page(browser, base, token) == "ready"
    assert browser.evaluate(f"{VIEW}.hidden") is True
    replaced = show(browser, "#runs", first)
    assert f"is run {run_id}'s export (promoted at " in replaced, replaced
    assert browser.evaluate("document.querySelectorAll('#provenance-table tbody tr').length") == 8
    status = show(browser, "#provenance-status", run_id)
    rows = browser.evaluate(
        "[...document.querySelectorAll('#provenance-table tbody tr')]"
        ".map(tr => [...tr.cells].map(td => td.textContent))"
    )
    assert [row[0] for row in rows] == CHAIN
    assert rows[0][1:] == [
        "google/gemma-4-26b-a4b-it@main"
        f"converted by convert into gs://{BUCKET}/gemma4-26b/max-text-format/"
        "google--gemma-4-26b-a4b-it/main/scan_layers-false/",
        "google/gemma-4-26b-a4b-it@mainhttps://huggingface.co",
        "convert",
    ]
    assert rows[7][1] == f"{VERSIONS}2uploaded by promote, which gave it the champion alias"
    assert status.startswith(f"This run's export is the deployment {DEPLOYMENT}'s champion for ")
    current = "document.querySelectorAll('#provenance-status .champion.current').length"
    assert browser.evaluate(current) == 1
    box = browser.evaluate(
        "(() => { const r = document.getElementById('provenance-view').getBoundingClientRect();"
        " return {x: r.x + window.scrollX, y: r.y + window.scrollY, width: r.width,"
        " height: r.height}; })()"
    )
    shot = browser.call(
        "Page.captureScreenshot",
        format="png",
        captureBeyondViewport=True,
        clip={**box, "scale": 1},
    )
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    SCREENSHOT.write_bytes(base64.b64decode(shot["data"]))
    assert SCREENSHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def gcs_bucket(gcs):
    """The champion record's bucket, without a record."""
    gcs.client().create_bucket(BUCKET)
    return gcs


def test_records_missing_or_of_the_wrong_shape_are_said_not_guessed(
    airflow_db, auth_token, gcs_bucket
):
    """Synthetic runs (tests/ui/synthetic.py) keep no validate record: no layout, nothing named.
    One recorded before deployment identities says so. One whose export result is not an object
    takes its step from the champion record promote wrote, and names what it left out."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from fastapi.testclient import TestClient
    from sqlalchemy import insert, select

    from tpu_rl.run_record import run_record
    from tpu_rl.ui.app import app

    runs = synthetic.add_runs(3)
    settings = load_settings(SETTINGS).to_dict()
    run = RunLayout(load_settings(SETTINGS), runs[1], DEPLOYMENT)
    record = {"run_id": runs[1], "export_uri": run.export_dir, "step": 40, "metrics": {},
              "checkpoint_uri": f"{run.checkpoints_dir}40/", "promoted_at": "2026-01-05T10:00:00",
              "previous": [], "registry_version": None,
              "champion_uri": f"gs://{BUCKET}/gemma4-26b/champions/{DEPLOYMENT}.json"}  # fmt: skip
    values = {
        runs[0]: [("validate", "return_value", settings)],  # no deployment_id: an older version
        runs[1]: [
            ("validate", "return_value", run_record(settings, DEPLOYMENT)),
            ("export", "return_value", ["not", "an", "object"]),
            ("promote", "return_value", record),
        ],
    }
    tasks = [(runs[0], "validate"), (runs[1], "validate"), (runs[1], "promote")]
    with create_session() as session:
        ended = [synthetic.ti_row(r, task, "success", synthetic.START) for r, task in tasks]
        session.execute(insert(TaskInstance.__table__), ended)  # the XComs' task instances
        ids = dict(session.execute(select(DagRun.run_id, DagRun.id)).all())
        session.execute(
            insert(XComModel.__table__),
            [
                {"dag_run_id": ids[run_id], "dag_id": DAG_ID, "run_id": run_id, "task_id": task,
                 "key": key, "value": value, "map_index": -1, "timestamp": synthetic.START}
                for run_id, xcoms in values.items()
                for task, key, value in xcoms
            ],
        )  # fmt: skip
    client = TestClient(app)

    def view(run_id: str) -> dict[str, Any]:
        answer = client.get(
            "/api/provenance", params={"run_id": run_id}, cookies={"_token": auth_token}
        )
        assert answer.status_code == 200, answer.text
        return answer.json()

    assert view(runs[2])["error"] == (
        "No provenance: validate has not recorded the run's deployment identity"
    )
    before = view(runs[0])
    assert (before["links"], before["champion"]) == ([], None)
    assert before["error"] == (
        "No provenance: validate recorded no deployment identity (a run from before "
        "identities): its folders' names cannot be derived"
    )
    found = view(runs[1])
    assert found["error"] == "Not read: export's return_value should be an object: left out"
    links = {link["label"]: link for link in found["links"]}
    assert list(links) == CHAIN
    assert (links["step"]["text"], links["step"]["missing"]) == ("step 40", True)
    assert links["step"]["dataset"] == names.checkpoint_step(run, 40).as_dict()
    assert links["evaluation"]["text"] == "not recorded: no evaluation of step 40 was kept"
    assert links["approval"]["text"] == (
        "not recorded: approve kept no answer (a run from before it kept one)"
    )
    assert found["champion"]["text"] == (
        f"The deployment {DEPLOYMENT}'s champion for gemma4-26b has no record "
        f"(gs://{BUCKET}/gemma4-26b/champions/{DEPLOYMENT}.json does not exist)."
    )
    unknown = client.get(
        "/api/provenance", params={"run_id": "manual__none"}, cookies={"_token": auth_token}
    )
    assert unknown.status_code == 404
    assert unknown.json()["detail"] == "tpu_rl_post_training has no run 'manual__none'."
