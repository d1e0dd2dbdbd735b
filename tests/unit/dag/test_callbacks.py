"""tpu_rl.dag.callbacks: the timeout callback's cleanup in the teardowns' place, and the notes
it leaves."""

from __future__ import annotations

import pytest

from tests.support.old_record import OLD_RECORD, OLD_SLUG, RUN_ID
from tpu_rl.dag import callbacks
from tpu_rl.names import Step
from tpu_rl.report.run_note import NOTE_LIMIT, RL_PAGE
from tpu_rl.settings.run_settings import load_settings


def test_the_timeout_callback_reports_such_a_run(monkeypatch):
    from airflow.sdk.execution_time.xcom import XCom

    monkeypatch.setattr(XCom, "get_one", lambda **kw: OLD_RECORD)
    outcome = callbacks.cleanup_after_timeout({"reason": "timed_out", "run_id": RUN_ID})
    assert outcome is not None and outcome["removed"] == {}
    assert OLD_SLUG in outcome["errors"][0]


def test_the_runs_note_says_what_the_callback_removed_in_the_teardowns_place():
    note = callbacks.timeout_note({"jobs": ["a", "b"], "secrets": []}, "c1: deleted", ["x: 403"])
    assert note.split("\n\n") == [
        f"**{callbacks.TIMED_OUT}**",
        "The cleanups show skipped: the timeout callback ran in their place.",
        "Removed: jobs a, b",
        "Cluster c1: deleted",
        "Could not remove: x: 403",
        f"All runs: [RL post-training page]({RL_PAGE})",
    ]
    assert "Removed: no Kubernetes object" in callbacks.timeout_note({}, None, [])


def test_each_skipped_teardown_gets_its_own_note_within_the_limit():
    notes = callbacks.teardown_notes({"jobs": ["a" * 3000]}, None, [])
    assert set(notes) == {Step.CLEANUP_KUBERNETES, Step.CLEANUP_CLUSTER}
    assert notes[Step.CLEANUP_CLUSTER].endswith("Cluster: not reached")
    assert len(notes[Step.CLEANUP_KUBERNETES]) == NOTE_LIMIT


def test_a_cluster_absent_or_being_deleted_needs_nothing_more():
    from google.cloud.container_v1.types import Cluster

    assert callbacks.cluster_gone(None) == "not found: never created, or already deleted"
    stopping = Cluster(status=Cluster.Status.STOPPING)
    assert callbacks.cluster_gone(stopping) == "deletion already under way (GKE completes it)"
    assert callbacks.cluster_gone(Cluster(status=Cluster.Status.RUNNING)) is None


class ClusterHook:
    """GKEHook's delete_cluster, recorded, or raising `error`."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error, self.deleted = error, []

    def delete_cluster(self, name: str, project_id: str, wait_to_complete: bool) -> None:
        if self.error:
            raise self.error
        self.deleted.append((name, project_id, wait_to_complete))


@pytest.mark.parametrize(
    ("changes", "outcome"),
    [
        ({"cluster_mode": "existing"}, "kept: cluster_mode=existing, not the run's"),
        ({"keep_cluster": True}, "kept: keep_cluster is set (its TPUs keep billing)"),
    ],
)
def test_a_cluster_the_run_did_not_create_or_keeps_is_left(tutorial_conf, changes, outcome):
    hook = ClusterHook()
    s = load_settings({**tutorial_conf, **changes})
    assert callbacks.delete_created_cluster(hook, s, "gcp", "dep") == (outcome, None)
    assert hook.deleted == []


def test_the_runs_own_cluster_is_deleted_without_waiting(tutorial_conf, monkeypatch):
    from tpu_rl.cluster import ownership

    monkeypatch.setattr(ownership, "foreign_cluster", lambda s, conn, identity: None)
    hook, s = ClusterHook(), load_settings(tutorial_conf)
    assert callbacks.delete_created_cluster(hook, s, "gcp", "dep") == (
        "deletion started (GKE completes it)",
        None,
    )
    assert hook.deleted == [(s.cluster_name, s.project, False)]
    monkeypatch.setattr(ownership, "foreign_cluster", lambda s, conn, identity: "labelled other")
    assert callbacks.delete_created_cluster(ClusterHook(), s, "gcp", "dep")[0] == (
        "kept: labelled other"
    )
    monkeypatch.setattr(ownership, "foreign_cluster", lambda s, conn, identity: None)
    failed = callbacks.delete_created_cluster(ClusterHook(PermissionError("403")), s, "gcp", "d")
    assert failed == ("delete request failed", f"cluster {s.cluster_name} not deleted: 403")
