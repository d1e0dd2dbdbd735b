"""dagrun_timeout skips the teardowns; the DAG's on_failure_callback (reason timed_out) removes
the run's Kubernetes objects, as the dag-processor runs it: settings from the validate XCom,
the cluster through the GKE seam. Other failures leave it to the teardowns."""

from __future__ import annotations

import pytest

from tests.sandbox.harness import SETTINGS, Sandbox
from tpu_rl.backend import jobset as pathways_jobset
from tpu_rl.dag import callbacks
from tpu_rl.jobs import manifests
from tpu_rl.layout import RunLayout
from tpu_rl.settings.run_settings import load_settings

RUN_ID = "scheduled__2026-11-30T03:00:00+00:00"


@pytest.fixture
def box(tmp_path):
    with Sandbox(tmp_path).up(existing_cluster="gemma4-rl") as sandbox:
        yield sandbox


def run_objects(box: Sandbox, settings: dict) -> RunLayout:
    layout = RunLayout(load_settings(settings), RUN_ID)
    box.emu.create(pathways_jobset.backend_jobset(layout))
    box.emu.create(manifests.train_job(layout))
    box.emu.create(manifests.token_secret(layout, "hf_NotARealToken123"))
    return layout


def names(box: Sandbox) -> list[str]:
    return sorted(
        f"{kind}/{o['metadata']['name']}"
        for kind in ("jobsets", "jobs", "secrets")
        for o in box.emu.list(kind)
    )


def test_a_timed_out_run_loses_its_kubernetes_objects(box, monkeypatch):
    from airflow.sdk.execution_time.xcom import XCom

    settings = {**SETTINGS, "cluster_mode": "create"}
    layout = run_objects(box, settings)
    asked = []

    def get_one(**kwargs):
        asked.append(kwargs)
        return load_settings(settings).to_dict()

    monkeypatch.setattr(XCom, "get_one", get_one)
    outcome = callbacks.cleanup_after_timeout({"reason": "timed_out", "run_id": RUN_ID})
    assert asked[0]["task_id"] == "validate" and asked[0]["run_id"] == RUN_ID
    assert names(box) == []
    assert outcome["removed"]["jobsets"] == [layout.backend_jobset]
    assert outcome["errors"] == [] and outcome["cluster_left"] is True  # the janitor's


def test_other_failures_are_the_teardowns_work(box, monkeypatch):
    from airflow.sdk.execution_time.xcom import XCom

    run_objects(box, dict(SETTINGS))
    monkeypatch.setattr(XCom, "get_one", lambda **kw: pytest.fail("no lookup"))
    assert callbacks.cleanup_after_timeout({"reason": "task_failure", "run_id": RUN_ID}) is None
    assert len(names(box)) == 3


def test_a_run_timed_out_before_validating_created_nothing(box, monkeypatch):
    from airflow.sdk.execution_time.xcom import XCom

    monkeypatch.setattr(XCom, "get_one", lambda **kw: None)
    assert callbacks.cleanup_after_timeout({"reason": "timed_out", "run_id": RUN_ID}) is None
