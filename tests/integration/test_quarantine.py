"""Moving poisoned checkpoint saves to the run's quarantine folder, against the GCS emulator:
the saves at or after the anomaly step (committed or cut) leave `checkpoints/actor/`, so the
newest committed step there, the one Tunix restores, is the newest healthy one."""

from __future__ import annotations

import pytest
from airflow.providers.google.cloud.hooks import gcs as gcs_hooks

from sandbox.orbax_saves import checkpoint_uris
from tpu_rl import storage
from tpu_rl.checkpoints import quarantine

BASE = "gs://bucket/gemma4-26b/trained/"
ACTOR = f"{BASE}run/checkpoints/actor/"
QUARANTINE = f"{BASE}run/quarantine/"


@pytest.fixture
def gcs(monkeypatch):
    """The GCS emulator behind the GCS hook's client, with the run's saves of steps 30 and 40
    (committed) and 50 (cut before its commit file)."""
    from sandbox.cloud import GcsEmulator

    emulator = GcsEmulator()
    emulator.client().create_bucket("bucket")
    monkeypatch.setenv("AIRFLOW_CONN_C", '{"conn_type": "google_cloud_platform"}')
    # Airflow's own GCSHook (its list(), exists()) over the emulator's client
    monkeypatch.setattr(gcs_hooks.GCSHook, "get_conn", lambda hook: emulator.client())
    for step in (30, 40):
        for uri in checkpoint_uris(BASE, "run", step):
            emulator.write(uri)
    for uri in checkpoint_uris(BASE, "run", 50)[:-1]:
        emulator.write(uri)
    yield emulator
    emulator.stop()


def names(gcs, uri: str) -> list[str]:
    bucket, _, prefix = uri.removeprefix("gs://").partition("/")
    return [name[len(prefix) :] for name in gcs.names(bucket, prefix)]


def test_the_quarantine_is_beside_the_checkpoints_folder():
    assert quarantine.quarantine_dir(ACTOR) == QUARANTINE


def test_the_saves_from_the_anomaly_step_on_move_and_the_healthy_one_is_restored(gcs):
    poisoned = quarantine.steps_from(ACTOR, "c", 40)
    assert poisoned == [40, 50]  # the cut save too
    before = {
        step: sorted(n for n in names(gcs, ACTOR) if n.startswith(f"{step}/")) for step in poisoned
    }
    assert quarantine.quarantine_steps(ACTOR, "c", poisoned) == QUARANTINE
    assert storage.checkpoint_steps(ACTOR, "c") == [30]
    assert storage.newest_committed_step(ACTOR, "c") == (30, [])
    moved = names(gcs, QUARANTINE)
    assert sorted(moved) == sorted(before[40] + before[50])  # every object, same names
    assert "40/commit_success.txt" in moved and "50/commit_success.txt" not in moved


def test_a_move_run_again_finishes_and_moves_nothing_twice(gcs):
    quarantine.quarantine_steps(ACTOR, "c", [40])
    quarantine.quarantine_steps(ACTOR, "c", [40])  # a retry: nothing left to move
    assert quarantine.steps_from(ACTOR, "c", 40) == [50]
    assert "40/commit_success.txt" in names(gcs, QUARANTINE)


def test_a_step_loses_its_commit_file_first(gcs, monkeypatch):
    """Deleted commit file first: a move cut after any delete leaves no step Orbax restores."""
    from google.cloud.storage import Blob

    deleted: list[str] = []
    delete = Blob.delete
    monkeypatch.setattr(
        Blob, "delete", lambda blob, *a, **k: deleted.append(blob.name) or delete(blob, *a, **k)
    )
    quarantine.quarantine_steps(ACTOR, "c", [40])
    assert deleted[0].endswith("/actor/40/commit_success.txt") and len(deleted) > 1
