"""The training seen as it happens on the RL page. Progress reports at a
cadence that suits the run's length, the evaluations and curves the log and event files have so
far, model/TPU/slices/capacity columns, a model filter and a compare view of ticked runs.

Synthetic runs (tests/ui/synthetic.py): the page only reads what the wait and the tasks wrote;
the progress cadence and the curves' bounds are pure functions of the wait's state.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import insert, select, update

from tests.conftest import REPO
from tests.support.board import JOB, NAME, Files, follower, kl
from tests.ui import synthetic
from tests.ui.chromium import chromium_path
from tests.ui.pages import REWARDS, open_page, run_id
from tpu_rl.names import DAG_ID
from tpu_rl.rewards.event_files import Scalar, file_epoch
from tpu_rl.rewards.position import parse_position
from tpu_rl.training_log import evaluations
from tpu_rl.watch import curves, progress
from tpu_rl.watch.state import FollowState

pytestmark = pytest.mark.xdist_group("ui-browser")

SHOTS = REPO / "test-artifacts" / "live-training"
SPEND = progress.Spend(capacity="spot", usd_per_hour=40.0)
OTHER_MODEL = {"model_name": "qwen3-8b", "tpu_type": "v5p-64", "topology": "4x4x4",
               "capacity": "spot", "cluster_nodepool_count": 2, "num_trainer_slices": 1,
               "num_samplers_slices": 1, "learning_rate": 3e-6}  # fmt: skip


def reports_during(total: int, seconds_per_step: float, every_s: float) -> list[int]:
    """The steps a progress report (the run's page and note) comes at, one step line at a time."""
    state, steps = FollowState(), []
    for step in range(1, total + 1):
        state.step_marks = [*state.step_marks, [step, 1000.0 + step * seconds_per_step]][-20:]
        progress.observe(state, total, SPEND)
        if (event := progress.report_due(state, every_s)) is not None:
            steps.append(event["progress"]["step"])
    return steps


def test_progress_reports_follow_a_short_run_and_a_long_one():
    # the sandbox's compressed clock: 200 steps in 400 s of log time never reach 15 minutes;
    # a report every tenth of the steps instead of one at step 2 for the whole training
    assert reports_during(200, 2.0, 900.0) == [2, 20, 40, 60, 80, 100, 120, 140, 160, 180, 200]
    # a long run (200 steps of 3 min: 10 h) still reports every 15 minutes of training
    long_run = reports_during(200, 180.0, 900.0)
    assert len(long_run) == 41 and long_run[:6] == [2, 7, 12, 17, 20, 25]


def test_curves_stay_bounded_json_safe_and_reach_the_newest_step():
    scalars = [Scalar(curves.LOSS, step, 0.01 * math.sin(step), "f") for step in range(1, 5001)]
    scalars += [Scalar(curves.LOSS, 5001, math.nan, "f"), Scalar("other/tag", 3, 1.0, "f")]
    found: dict[str, Any] | None = None
    for start in range(0, len(scalars), 97):  # read as the event files grow
        found = curves.record(found, scalars[start : start + 97])
    for step in (10, 20, 4990):
        found = curves.with_save(found, step)
    points = curves.points(found, curves.LOSS)
    assert len(points) <= curves.MAX_POINTS + 1 and points[0][0] < 100
    assert points[-1] == [5000, float(f"{0.01 * math.sin(5000):.6g}")]  # not the nan
    assert set(found["series"]) == {curves.LOSS} and found["saves"] == [10, 20, 4990]
    state = FollowState(curves=found)
    text = json.dumps(state.as_dict(), allow_nan=False)  # what the Job's annotation holds
    assert parse_position(text).curves == found and len(text) < 20_000


async def test_the_wait_keeps_the_curves_and_reads_their_last_steps_at_its_end():
    files = Files([loss(1), loss(2), kl(2, 0.01)], [loss(3)])
    wait = follower(files)
    assert await wait._read_event_files(JOB) is None
    assert curves.points(wait.state.curves, curves.LOSS) == [[1, 0.01], [2, 0.02]]
    wait.reader.found = lambda: {"status": "success"}  # the Post line, read by the stream
    event = await wait.poll()
    # Tunix flushes its last steps at close: read once more, this attempt's files only
    assert [p[0] for p in curves.points(event["curves"], curves.LOSS)] == [1, 2, 3]
    assert files.asked[1][1] == file_epoch(NAME)


def loss(step: int) -> Scalar:
    return Scalar(curves.LOSS, step, 0.01 * step, NAME)


def test_the_evaluations_so_far_while_training_runs():
    state = {"pre": REWARDS["pre"], "intermediate": REWARDS["intermediate"][:2]}
    so_far = evaluations.so_far(None, [], [], state)
    assert so_far["pre"] == REWARDS["pre"]
    assert [e["step"] for e in so_far["intermediate"]] == [10, 20]


def add_curves(session: Any, run: str, steps: int, slope: float) -> None:
    """The wait's curves XCom of a run (tpu_rl.watch.curves), as its progress reports write."""
    from airflow.models.dagrun import DagRun
    from airflow.models.xcom import XComModel

    scalars = []
    for step in range(1, steps + 1):
        mean = 0.1 + slope * step
        scalars += [Scalar(curves.LOSS, step, 0.02 * math.cos(step / 3), "f"),
                    Scalar(curves.KL, step, 0.001 * step, "f"),
                    Scalar(curves.REWARD_MEAN, step - 1, mean, "f"),
                    Scalar(curves.REWARD_MAX, step - 1, mean + 0.3, "f"),
                    Scalar(curves.REWARD_MIN, step - 1, max(0.0, mean - 0.3), "f"),
                    Scalar(curves.LENGTH, step - 1, 180.0 - step, "f")]  # fmt: skip
    found = curves.record(None, scalars)
    for step in range(5, steps + 1, 5):
        found = curves.with_save(found, step)
    dag_run_id = session.scalar(select(DagRun.id).where(DagRun.run_id == run))
    row = {"dag_run_id": dag_run_id, "dag_id": DAG_ID, "run_id": run,
           "task_id": "wait_for_rewards", "key": curves.XCOM_KEY, "map_index": -1,
           "value": found, "timestamp": synthetic.START}  # fmt: skip
    session.execute(insert(XComModel.__table__), [row])


def set_conf(session: Any, run: str, conf: dict[str, Any]) -> None:
    from airflow.models.dagrun import DagRun

    session.execute(update(DagRun).where(DagRun.run_id == run).values(conf=conf))


def live_runs() -> None:
    """Three runs: 0 and 1 ended (1 on another model, TPU and capacity), 2 trains on: its
    progress, evaluations so far and curves written by its progress reports."""
    from airflow.utils.session import create_session

    synthetic.add_runs(3)
    with create_session() as session:
        set_conf(session, run_id(1), OTHER_MODEL)
        add_curves(session, run_id(0), 50, 0.004)
        add_curves(session, run_id(1), 50, 0.002)
        add_curves(session, run_id(2), 30, 0.006)
        so_far = {"pre": REWARDS["pre"], "intermediate": REWARDS["intermediate"][:2]}
        figures = {"step": 30, "total_steps": 50, "steps_per_hour": 600.0,
                   "eta": "2026-01-05T09:02:00+00:00", "spent_usd": 12.5, "projected_usd": 20.8,
                   "billed_as": "usage", "line": "Training progress: step 30/50 (60%), 600.0 "
                   "steps/h, ETA 2026-01-05T09:02:00+00:00 (in 0.0 h); spend so far $12.50, "
                   "projected $20.83 (spot $40.00/h)"}  # fmt: skip
        synthetic.put_summary(
            session, run_id(2), "wait_for_rewards", progress=figures, rewards=so_far
        )
        anomaly = {"rule": "loss_spike", "step": 41, "anomaly_step": 40, "why": "loss 12",
                   "evidence": [], "healthy_step": 35, "healthy_checkpoint": None,
                   "action": "export_healthy"}  # fmt: skip
        synthetic.put_summary(session, run_id(0), "wait_for_rewards", anomaly=anomaly)


def test_the_json_of_columns_curves_thresholds_and_saves(auth_token):
    from tpu_rl.ui.app import app

    live_runs()
    client = TestClient(app)
    cookies = {"_token": auth_token}
    runs = {r["run_id"]: r for r in client.get("/api/runs", cookies=cookies).json()["runs"]}
    first, other, training = runs[run_id(0)], runs[run_id(1)], runs[run_id(2)]
    setup = [[r[k] for k in ("model", "tpu_type", "slices", "capacity")] for r in (first, other)]
    assert setup == [
        ["gemma4-26b", "v6e-32", "1", "reservation"],
        ["qwen3-8b", "v5p-64", "2 (1 train + 1 sample)", "spot"],
    ]
    assert other["settings"] == OTHER_MODEL
    assert first["settings"] == {}  # cluster_nodepool_count 1: the default
    assert first["anomaly"] == {"rule": "loss_spike", "step": 41, "anomaly_step": 40}
    # while training: its step and spend, and the evaluations the log has so far
    assert training["progress"].startswith("step 30/50 (60%)")
    assert [e["step"] for e in training["evaluations"]] == [0, 10, 20]
    response = client.get(
        "/api/curves", params={"run_id": [run_id(0), run_id(2), "nope"]}, cookies=cookies
    )
    assert response.status_code == 200
    json.loads(response.text, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    found = response.json()["runs"]
    assert set(found) == {run_id(0), run_id(2)}
    live = found[run_id(2)]
    assert set(live["curves"]) == {"loss", "kl", "reward_mean", "reward_max", "reward_min",
                                   "completion_length"}  # fmt: skip
    assert live["curves"]["kl"][-1] == [30, 0.03] and len(live["curves"]["loss"]) == 30
    assert live["saves"] == [5, 10, 15, 20, 25, 30] and live["kept"] == live["saves"]
    assert found[run_id(0)]["kept"] == list(range(5, 51, 5))  # Orbax's newest ten
    assert live["thresholds"] == {"loss": 10.0, "kl": 0.1, "reward_drop": 1.0}
    assert client.get("/api/curves", params={"run_id": "x"}).status_code == 401
    too_many = {"run_id": [f"r{i}" for i in range(9)]}
    assert client.get("/api/curves", params=too_many, cookies=cookies).status_code == 422


@pytest.mark.skipif(
    chromium_path() is None, reason="Debian's chromium is not installed: make chromium"
)
def test_live_curves_filter_and_compare_in_headless_chromium(
    airflow_db, auth_token, ui_server, browser
):
    from airflow.utils.session import create_session

    live_runs()
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert open_page(browser, ui_server, auth_token) == "ready"
    # the table with its new columns still fits the 1280 px a laptop gives it
    browser.call(
        "Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=1,
        mobile=False,
    )  # fmt: skip
    overflow = "document.querySelector('.table:has(#runs)').scrollWidth"
    overflow += " - document.querySelector('.table:has(#runs)').clientWidth"
    assert browser.evaluate(overflow) == 0
    browser.wait_for("document.querySelectorAll('#curves svg.curve-chart').length === 4")
    charts = browser.evaluate(
        "[...document.querySelectorAll('#curves svg.curve-chart')].map(svg => ({"
        " curve: svg.dataset.curve,"
        " points: [...svg.querySelectorAll('polyline.curve')].map(p => +p.dataset.points),"
        " bands: svg.querySelectorAll('polygon.band').length,"
        " saves: svg.querySelectorAll('rect.save').length,"
        " kept: svg.querySelectorAll('rect.save.kept').length,"
        " thresholds: svg.querySelectorAll('line.threshold').length}))"
    )
    assert browser.evaluate("document.getElementById('curves').dataset.run") == run_id(2)
    assert [c["curve"] for c in charts] == ["loss", "kl", "reward", "length"]
    assert all(c["points"] == [30] and c["saves"] == 6 and c["kept"] == 6 for c in charts)
    assert charts[2]["bands"] == 1 and charts[1]["thresholds"] == 1  # KL floor 0.1 near 0.03
    evals = browser.evaluate("[...document.querySelectorAll('#eval-run option')].map(o => o.value)")
    assert evals[0] == run_id(2)  # the training run's evaluations so far
    progress_line = "document.querySelector('#runs tr.progress').textContent"
    assert browser.evaluate(progress_line).startswith("training: step 30/50")
    browser.evaluate("document.querySelector('.training-curves').scrollIntoView()")
    browser.screenshot(SHOTS / "curves-while-training.png")
    # the run trains on: the page reads it again on its own, and its progress and curves move
    loads = int(browser.evaluate("document.body.dataset.loads"))
    browser.wait_for(f"+document.body.dataset.loads > {loads}")
    with create_session() as session:
        moved = {"step": 45, "total_steps": 50, "line": "Training progress: step 45/50 (90%)"}
        synthetic.put_summary(session, run_id(2), "wait_for_rewards", progress=moved)
        from airflow.models.xcom import XComModel

        session.execute(
            XComModel.__table__.delete().where(
                XComModel.run_id == run_id(2), XComModel.key == curves.XCOM_KEY
            )
        )
        add_curves(session, run_id(2), 45, 0.006)
    loads = int(browser.evaluate("document.body.dataset.loads"))
    browser.evaluate("load()")  # the next refresh now rather than in up to 5 s
    browser.wait_for(f"+document.body.dataset.loads > {loads}")
    assert browser.evaluate(progress_line) == "training: step 45/50 (90%)"
    assert (
        browser.evaluate(
            "+document.querySelector('#curves svg[data-curve=loss] polyline.curve').dataset.points"
        )
        == 45
    )
    # the older run the watchdog stopped: its anomaly a red line
    browser.evaluate(
        f"{{ const s = document.getElementById('curve-run'); s.value = '{run_id(0)}';"
        " s.dispatchEvent(new Event('change')) }"
    )
    browser.wait_for(f"document.getElementById('curves').dataset.run === '{run_id(0)}'")
    assert browser.evaluate("document.querySelectorAll('#curves line.anomaly').length") == 4
    assert "loss_spike at step 41" in browser.evaluate(
        "document.querySelector('.curve-note').textContent"
    )
    browser.evaluate("document.querySelector('.training-curves').scrollIntoView()")
    browser.screenshot(SHOTS / "curves-anomaly.png")
    # filter by model: the other model's run only
    browser.evaluate(
        "{ const f = document.getElementById('model-filter'); f.value = 'qwen3-8b';"
        " f.dispatchEvent(new Event('change')) }"
    )
    rows = browser.evaluate(
        "[...document.querySelectorAll('#runs tr.run')].map(tr => [tr.cells[0].textContent,"
        " ...[...tr.cells[3].querySelectorAll('span span')].map(s => s.textContent)])"
    )
    assert rows == [[run_id(1), "qwen3-8b", "v5p-64 \u00d7 2 (1 train + 1 sample)", "spot"]]
    assert browser.evaluate("document.getElementById('status').textContent") == (
        "3 runs (1 of the model shown), newest first."
    )
    browser.screenshot(SHOTS / "filtered.png")
    # compare the two ended runs
    browser.evaluate(
        "{ const f = document.getElementById('model-filter'); f.value = '';"
        " f.dispatchEvent(new Event('change'));"
        f" for (const id of ['{run_id(0)}', '{run_id(1)}'])"
        "   document.querySelector(`input[aria-label='compare ${id}']`).click();"
        " document.getElementById('compare').click() }"
    )
    browser.wait_for("document.querySelectorAll('#compare-curves polyline.curve').length === 8")
    table = browser.evaluate(
        "[...document.querySelectorAll('#compare-table tr')].map(tr => [...tr.cells]"
        ".map(c => c.textContent))"
    )
    by_label = {row[0]: row[1:] for row in table}
    assert by_label[""] == [run_id(1), run_id(0)]  # newest first, as the table
    assert by_label["model"] == ["qwen3-8b", "gemma4-26b"]
    assert by_label["capacity"] == ["spot", "reservation"]
    assert by_label["learning_rate"] == ["0.000003", "(default)"]
    assert by_label["TPU"] == ["v5p-64", "v6e-32"]
    assert by_label["topology"] == ['"4x4x4"', "(default)"]
    assert "tpu_type" not in by_label and "est. cost" in by_label
    browser.evaluate("document.getElementById('compare-view').scrollIntoView()")
    browser.screenshot(SHOTS / "compare.png")
