"""dagrun_timeout skips the teardowns; the DAG's on_failure_callback (reason timed_out) removes
the run's Kubernetes objects and has GKE delete a cluster the run created, as the dag-processor
runs it: settings from the validate XCom, the cluster through the GKE seam. Other failures
leave it to the teardowns."""

from __future__ import annotations

import json

import pytest

from sandbox.harness import SETTINGS, Sandbox
from tpu_rl.backend import jobset as pathways_jobset
from tpu_rl.dag import callbacks
from tpu_rl.deployment import airflow_api_conn_id
from tpu_rl.jobs import manifests
from tpu_rl.layout import RunLayout
from tpu_rl.operators.cluster import CreateClusterOperator
from tpu_rl.report import run_note
from tpu_rl.run_record import run_record
from tpu_rl.settings.run_settings import load_settings

RUN_ID = "scheduled__2026-11-30T03:00:00+00:00"
RUN_DEPLOYMENT = "test-deployment"  # the identity validate recorded for the run
TEARDOWNS = ("cleanup_kubernetes", "cleanup_cluster")


@pytest.fixture
def box(tmp_path):
    with Sandbox(tmp_path).up(existing_cluster="gemma4-rl") as sandbox:
        yield sandbox


def run_objects(box: Sandbox, settings: dict) -> RunLayout:
    layout = RunLayout(load_settings(settings), RUN_ID, RUN_DEPLOYMENT)
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


def timed_out(box: Sandbox, monkeypatch, settings: dict, record: object = None) -> dict:
    """The scheduler's dagrun_timeout falls: the callback runs with the validated settings
    (or `record`, what validate recorded); the run's note it sets is the outcome's `note`."""
    from airflow.sdk.execution_time.xcom import XCom

    asked, notes, task_notes = [], [], {}

    def get_one(**kwargs):
        asked.append(kwargs)
        return record or run_record(load_settings(settings).to_dict(), RUN_DEPLOYMENT)

    def set_task_note(conn_id, dag_id, run_id, task_id, text):
        assert (conn_id, dag_id, run_id) == (airflow_api_conn_id(), "tpu_rl_post_training", RUN_ID)
        task_notes[task_id] = text.split("\n\n")
        return True

    monkeypatch.setattr(XCom, "get_one", get_one)
    monkeypatch.setattr(run_note, "set_run_note", lambda *args: notes.append(args) or True)
    monkeypatch.setattr(run_note, "set_task_note", set_task_note, raising=False)
    outcome = callbacks.cleanup_after_timeout({"reason": "timed_out", "run_id": RUN_ID})
    assert asked[0]["task_id"] == "validate" and asked[0]["run_id"] == RUN_ID
    [(conn_id, dag_id, run_id, note)] = notes
    assert (conn_id, dag_id, run_id) == (airflow_api_conn_id(), "tpu_rl_post_training", RUN_ID)
    return {**outcome, "note": note.split("\n\n"), "task_notes": task_notes}


def clusters(box: Sandbox) -> list[str]:
    """The clusters in the fake cloud (what gcluster deployed and GKE still has)."""
    state = json.loads(box.state_file.read_text()) if box.state_file.exists() else {}
    return sorted(state.get("clusters", {}))


def test_a_run_timed_out_mid_training_leaves_no_cluster(tmp_path, monkeypatch):
    """cluster_mode=create, the run's create_cluster deployed the cluster (fake
    gcluster), training runs (backend, Job, Secret) when dagrun_timeout falls: the teardowns are
    skipped, and the callback leaves neither the Kubernetes objects nor the cluster (its TPU
    node pool) to a janitor."""
    settings = {**SETTINGS, "cluster_mode": "create", "cluster_name": "rl-created"}
    monkeypatch.setenv("TPU_RL_DEPLOYMENT_ID", RUN_DEPLOYMENT)  # labels the cluster it makes
    with Sandbox(tmp_path).up() as box:
        CreateClusterOperator(task_id="create_cluster", settings=settings).execute({})
        assert clusters(box) == ["rl-created"]
        box.control_plane.sync()  # the cloud as time passes: the deployed cluster's nodes
        assert box.emu.list("nodes")  # the TPU node pool is up
        layout = run_objects(box, settings)
        outcome = timed_out(box, monkeypatch, settings)
        assert names(box) == []
        assert clusters(box) == [] and box.control_plane.deleted == ["rl-created"]
        box.control_plane.sync()
        assert box.emu.list("nodes") == []  # the node pool went with the cluster
    assert outcome["removed"]["jobsets"] == [layout.backend_jobset]
    assert outcome["errors"] == []
    assert outcome["cluster"] == "deletion started (GKE completes it)"
    # the graph shows both cleanups skipped; the run's note says what went instead
    assert outcome["note"][:2] == [
        "**failed: timed out (dagrun_timeout)**",
        "The cleanups show skipped: the timeout callback ran in their place.",
    ]
    removed = outcome["note"][2]
    assert removed.startswith("Removed: ") and layout.backend_jobset in removed
    assert layout.job_names["train"] in removed
    assert outcome["note"][3] == "Cluster rl-created: deletion started (GKE completes it)"
    # each skipped teardown's own record says what the callback did in its place
    skipped = "Skipped by dagrun_timeout; the timeout callback ran in its place."
    kubernetes, cluster = (outcome["task_notes"].get(t) for t in TEARDOWNS)
    assert kubernetes == [skipped, removed] and cluster == [skipped, outcome["note"][3]]


@pytest.mark.parametrize(
    ("change", "kept"),
    [({"cluster_mode": "existing"}, "kept: cluster_mode"), ({"keep_cluster": True}, "kept: keep")],
)
def test_a_cluster_the_run_does_not_own_stays(box, monkeypatch, change, kept):
    settings = {**SETTINGS, "cluster_mode": "create", **change}
    run_objects(box, settings)
    outcome = timed_out(box, monkeypatch, settings)
    assert names(box) == [] and outcome["errors"] == []
    assert clusters(box) == ["gemma4-rl"] and box.control_plane.deleted == []
    assert outcome["cluster"].startswith(kept)


def test_a_cluster_never_made_or_being_deleted_needs_no_request(box, monkeypatch):
    """The timeout fell before create_cluster, or while cleanup_cluster's destroy had GKE
    deleting the cluster: nothing to ask, and no error."""
    settings = {**SETTINGS, "cluster_mode": "create", "cluster_name": "rl-never-made"}
    run_objects(box, settings)
    assert timed_out(box, monkeypatch, settings)["cluster"].startswith("not found")
    state = json.loads(box.state_file.read_text())
    state["clusters"]["gemma4-rl"]["status"] = "STOPPING"
    box.state_file.write_text(json.dumps(state))
    outcome = timed_out(box, monkeypatch, {**settings, "cluster_name": "gemma4-rl"})
    assert outcome["cluster"].startswith("deletion already under way")
    assert outcome["errors"] == [] and box.control_plane.deleted == []


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


def test_a_record_that_does_not_load_is_named_not_taken_for_nothing(box, monkeypatch):
    """validate's record whose settings no longer load (or whose identity is not a name) is not
    read as "timed out before validating: nothing to remove", which would leave the run's
    objects unsaid: the callback names it in one line, in its log and the run's note."""
    settings = dict(SETTINGS)
    run_objects(box, settings)
    recorded = run_record(load_settings(settings).to_dict(), RUN_DEPLOYMENT)
    for record, why in [
        ({**recorded, "retired_setting": 1}, "retired_setting"),  # a version since removed it
        ({**recorded, "deployment_id": {"id": 7}}, "{'id': 7}"),
    ]:
        outcome = timed_out(box, monkeypatch, settings, record)
        [error] = outcome["errors"]
        assert error.startswith("validate's record of the run is unreadable: ") and why in error
        assert "\n" not in error and f"Could not remove: {error}" in outcome["note"]
        assert [f"Could not remove: {error}" in outcome["task_notes"][t] for t in TEARDOWNS] == [
            True,
            True,
        ]
        assert len(names(box)) == 3  # nothing guessed
