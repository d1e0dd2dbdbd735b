"""GCS look-ups: which checkpoint step export may use, and what an export lacks."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tpu_rl import storage

ACTOR = "gs://bucket/gemma4-26b/trained/run/checkpoints/actor/"


class FakeGCSHook:
    """GCSHook's list() over a fixed set of object names."""

    objects: list[str] = []

    def __init__(self, gcp_conn_id: str) -> None:
        self.gcp_conn_id = gcp_conn_id

    def list(self, bucket: str, prefix: str) -> list[str]:
        assert bucket == "bucket"
        return [name for name in self.objects if name.startswith(prefix)]


@pytest.fixture
def bucket(monkeypatch):
    monkeypatch.setattr(storage, "GCSHook", FakeGCSHook)
    return FakeGCSHook


def step_objects(step: int, committed: bool, marker: str = "_CHECKPOINT_METADATA") -> list[str]:
    base = f"gemma4-26b/trained/run/checkpoints/actor/{step}/"
    arrays = [f"{base}model_params/{f}" for f in ("_METADATA", "_sharding", "manifest.ocdbt")]
    return arrays + ([base + marker] if committed else [])


def test_a_step_without_its_commit_marker_is_not_complete(bucket):
    """The newest step was cut off mid-save (arrays, no marker): export the one before."""
    bucket.objects = step_objects(25, True) + step_objects(50, False)
    assert storage.checkpoint_steps(ACTOR, "c") == ([25], [50])


def test_older_orbax_commit_success_counts_and_params_are_required(bucket):
    bucket.objects = [
        *step_objects(10, True, marker="commit_success.txt"),
        "gemma4-26b/trained/run/checkpoints/actor/20/_CHECKPOINT_METADATA",  # no params
        "gemma4-26b/trained/run/checkpoints/actor/30/model_params_old/_METADATA",
    ]
    assert storage.checkpoint_steps(ACTOR, "c") == ([10], [])


def test_steps_sort_as_numbers(bucket):
    bucket.objects = step_objects(9, True) + step_objects(100, True) + step_objects(20, True)
    assert storage.checkpoint_steps(ACTOR, "c") == ([9, 20, 100], [])


@pytest.fixture
def gcs(monkeypatch):
    """The GCS emulator behind the hook's client, with a bucket."""
    from tests.sandbox.cloud import GcsEmulator

    emulator = GcsEmulator()
    emulator.client().create_bucket("bucket")
    monkeypatch.setattr(
        storage, "GCSHook", lambda gcp_conn_id: SimpleNamespace(get_conn=emulator.client)
    )
    yield emulator
    emulator.stop()


def test_a_json_object_reads_what_was_written_from_another_process(gcs):
    uri = "gs://bucket/gemma4-26b/trained/run/training_attempts.json"
    first = storage.JsonObject(uri, "c")
    assert first.read() is None and first.generation == 0  # to be created, not overwritten
    first.write({"attempts": [{"attempt": 1}], "first_pre": {"mean_reward": 0.08}})
    again = storage.JsonObject(uri, "c")
    assert again.read() == {"attempts": [{"attempt": 1}], "first_pre": {"mean_reward": 0.08}}
    again.write({"attempts": []})
    assert storage.JsonObject(uri, "c").read() == {"attempts": []}
