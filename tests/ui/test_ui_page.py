"""The page in a real headless Chromium, over runs the sandbox made; the reports they wrote.

The sandbox runs the DAG three times (two that improve the reward, the second on Spot capacity
preempted once and resumed, one the gate stops); the
api-server app (Airflow's own factory, which mounts the plugin) serves the page on loopback:
the session's one (tests/ui/conftest.py), as its one Chromium reads it.
"""

from __future__ import annotations

import json
import re
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import pytest

from sandbox.harness import HF_TOKEN, SETTINGS, Sandbox, Workloads
from sandbox.workloads import EvalResult
from tests.ui import synthetic
from tests.ui.chromium import chromium_path
from tests.ui.pages import SCREENSHOT, read_page

pytestmark = pytest.mark.xdist_group("ui-browser")

# a Spot run preempted at step 60 of 100 resumes from its checkpoint at step 50
SPOT = {**SETTINGS, "capacity": "spot", "reservation": "", "num_batches": 100}
RUNS = [
    (SETTINGS, Workloads()),
    (SPOT, Workloads(post=EvalResult(corr=14, mean_reward=0.1502), preempt_at_steps=(60,))),
    (SETTINGS, Workloads(post=EvalResult(corr=5, mean_reward=-0.05))),  # stopped by the gate
]


def sandbox_runs(tmp: Path) -> list[dict[str, Any]]:
    """Three DAG runs in the sandbox; per run its state, export and the report files in GCS."""
    synthetic.clear_runs()
    done = []
    with Sandbox(tmp).up() as box:
        for conf, workloads in RUNS:
            result = box.run(dict(conf), workloads)
            export = result.xcoms.get("verify.return_value")
            reports = {}
            if export:
                bucket, _, prefix = export.removeprefix("gs://").partition("/")
                blobs = box.gcs.client().bucket(bucket)
                for name in ("run-report.json", "run-report.md"):
                    if blobs.blob(prefix + name).exists():
                        reports[name] = blobs.blob(prefix + name).download_as_text()
            done.append({"state": result.state, "export": export, "reports": reports})
    return done


def check_reports(runs: list[dict[str, Any]]) -> None:
    """verify wrote both reports next to each export; the gate-stopped run has none."""
    assert [r["state"] for r in runs] == ["success", "success", "failed"]
    for run in runs[:2]:
        assert set(run["reports"]) == {"run-report.json", "run-report.md"}
        report = json.loads(run["reports"]["run-report.json"])
        assert report["export_uri"] == run["export"]
        assert report["checkpoint_step"] is not None
        assert report["gate"]["post_mean_reward"] == report["metrics"]["post"]["mean_reward"]
        assert {"start_backend", "wait_for_rewards", "stop_backend"} <= set(
            report["durations_seconds"]
        )
        assert report["tpu"]["hosts"] == 8 and report["tpu"]["host_hours"] > 0
        assert report["summary"] in run["reports"]["run-report.md"]
        assert all(HF_TOKEN not in text for text in run["reports"].values())
    # the first made its reserved cluster, the Spot run had two attempts; both bill node life
    first, spot = (json.loads(run["reports"]["run-report.json"]) for run in runs[:2])
    # the TPU nodes' life, as the run's steps saw them (report/billing.py)
    assert first["tpu"]["rule"] == "tpu_node_life" and len(first["attempts"]) == 1
    assert spot["tpu"]["rule"] == "tpu_node_life" and spot["capacity"] == "spot"
    assert [a["outcome"] for a in spot["attempts"]] == ["capacity_lost", "completed"]
    # preempted once step 60 is computed, after the save of step 50: Tunix prints a step's line
    # one step late (peft_trainer.py:735-740, 770-787), so the log showed steps 51-59 again; on a
    # loaded machine the client may log step 60's line before its node goes (51-60 again)
    assert spot["steps_recomputed"] in (9, 10) and spot["checkpoint_step"] == 100
    assert all(a["tpu_node_hours"] > 0 for a in spot["attempts"])
    assert runs[2]["reports"] == {}


def check_plugin_registered(base: str, token: str) -> None:
    plugins = httpx.get(
        f"{base}/api/v2/plugins", headers={"Authorization": f"Bearer {token}"}
    ).json()["plugins"]
    ours = next(p for p in plugins if p["name"] == "tpu_rl")
    assert ours["fastapi_apps"][0]["url_prefix"] == "/tpu-rl"
    assert ours["external_views"][0]["name"] == "RL post-training"


# One test, not several sharing fixtures: the page shows the sandbox's runs, which a DB reset
# between tests (tests/dags' own fixture, on the same xdist worker) would lose.
@pytest.mark.skipif(
    chromium_path() is None, reason="Debian's chromium is not installed: make chromium"
)
def test_sandbox_runs_reports_and_the_page_in_headless_chromium(
    airflow_db, auth_token, ui_server, browser, tmp_path
):
    runs = sandbox_runs(tmp_path / "sandbox")
    check_reports(runs)
    check_plugin_registered(ui_server, auth_token)
    rows, chart = read_page(browser, ui_server, auth_token)
    header = [
        "run",
        "state",
        "started",
        "setup",
        "duration",
        "pre",
        "post",
        "gain",
        "pre_acc",
        "post_acc",
        "gate",
        "hours",
        "counted_as",
        "cost",
        "attempts",
        "checkpoint",
        "export",
        "logs",
    ]
    table = [dict(zip(header, row, strict=True)) for row in rows]
    assert [r["gate"] for r in table] == ["stopped", "passed", "passed"]  # newest first
    assert [r["post"] for r in table] == ["-0.0500", "0.1502", "0.1234"]
    assert [r["gain"] for r in table] == ["-0.1321", "+0.0681", "+0.0413"]
    assert {r["pre"] for r in table} == {"0.0821"}
    # the export and, beside it, its run report: one click away
    assert [r["export"] for r in table] == ["", "exportreportprovenance", "exportreportprovenance"]
    assert all(r["logs"] == "logs" and r["hours"] for r in table)
    # the page shows the cost each exported run's report shows: outcome's one figure
    reported = [json.loads(run["reports"]["run-report.json"])["tpu"] for run in runs[:2]]
    for row, tpu in zip([table[2], table[1]], reported, strict=True):
        usd = tpu["estimated_cost_usd"]  # None: a reservation, paid by its commitment
        assert row["cost"] == ("reserved" if usd is None else f"${usd:.2f}")
        assert row["hours"] == f"{tpu['chip_hours']:.2f} ({tpu['host_hours']:.2f})"
    # every run's steps saw its TPU nodes: each bills their life (report/billing.py)
    assert [r["counted_as"] for r in table] == ["TPU nodes' life"] * 3
    assert table[0]["attempts"] == table[2]["attempts"] == "1"
    assert re.fullmatch(r"2: \d+ steps redone", table[1]["attempts"]), table[1]
    assert chart["circles"] == 6 and chart["lines"] == 2 and chart["width"] > 600
    assert chart["status"] == "3 runs, newest first."
    assert chart["overflow"] == 0 and chart["tableOverflow"] == 0  # fits 1280 px
    # round y ticks, evenly spaced; the runs' dates (today, same day: with the time) on x
    steps = {round(float(b) - float(a), 6) for a, b in pairwise(chart["yticks"])}
    assert len(steps) == 1 and len(chart["yticks"]) >= 3
    assert all(len(t.split(".")[-1]) <= 3 for t in chart["yticks"])
    assert chart["xticks"] and all(any(c.isdigit() for c in t) for t in chart["xticks"])
    [reason] = chart["reasons"]  # the stopped run's: which task, its message's first line
    assert reason.startswith("failed at gate: reward gate: post-training mean_reward=-0.0500")
    assert SCREENSHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
