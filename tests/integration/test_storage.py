"""GCS look-ups: which checkpoint step export and resume may use, and what an export lacks."""

from __future__ import annotations

import pytest

from tpu_rl import storage

ACTOR = "gs://bucket/gemma4-26b/trained/run/checkpoints/actor/"
PREFIX = "gemma4-26b/trained/run/checkpoints/actor/"


class FakeGCSHook:
    """GCSHook's list() (with its delimiter: the folders, as GCS's `prefixes`) and exists()
    over a fixed set of object names; counts the requests."""

    objects: list[str] = []
    requests: list[str] = []

    def __init__(self, gcp_conn_id: str) -> None:
        self.gcp_conn_id = gcp_conn_id

    def list(self, bucket: str, prefix: str, delimiter: str | None = None) -> list[str]:
        assert bucket == "bucket"
        self.requests.append(f"list {prefix} {delimiter}")
        names = [name for name in self.objects if name.startswith(prefix)]
        if delimiter is None:
            return names
        folders = {
            prefix + name[len(prefix) :].split(delimiter)[0] + delimiter
            for name in names
            if delimiter in name[len(prefix) :]
        }
        return sorted(folders) or names

    def exists(self, bucket: str, name: str) -> bool:
        self.requests.append(f"get {name}")
        return name in self.objects


@pytest.fixture
def bucket(monkeypatch):
    monkeypatch.setattr(storage, "GCSHook", FakeGCSHook)
    FakeGCSHook.requests = []
    return FakeGCSHook


def step_objects(step: int, written: int | None = None) -> list[str]:
    """A step's objects in Orbax's order on gs:// (metadata first, commit_success.txt last),
    cut after `written` of them (None: the whole save)."""
    base = f"{PREFIX}{step}/"
    objects = [
        base + "_CHECKPOINT_METADATA",
        *(f"{base}model_params/{f}" for f in ("_METADATA", "_sharding", "manifest.ocdbt")),
        base + "model_params/commit_success.txt",
        base + "commit_success.txt",
    ]
    return objects[:written]


def test_a_step_cut_before_its_commit_file_is_not_committed(bucket):
    """Step 50's save was cut after its metadata and arrays: resume and export take 25."""
    bucket.objects = step_objects(25) + step_objects(50, written=5)
    assert storage.newest_committed_step(ACTOR, "c") == (25, [50])


def test_the_step_metadata_alone_does_not_count(bucket):
    """Orbax writes `_CHECKPOINT_METADATA` as it creates the folder: a save cut at once."""
    bucket.objects = step_objects(10, written=1)
    assert storage.newest_committed_step(ACTOR, "c") == (None, [10])
    assert not storage.step_committed(f"{ACTOR}10/", "c")


def test_steps_sort_as_numbers_and_other_folders_are_ignored(bucket):
    bucket.objects = [
        *step_objects(9),
        *step_objects(100),
        *step_objects(20),
        f"{PREFIX}tmp/x",
        f"{PREFIX}stray-object",
    ]
    assert storage.checkpoint_steps(ACTOR, "c") == [9, 20, 100]
    assert storage.newest_committed_step(ACTOR, "c") == (100, [])


def test_the_newest_committed_step_costs_one_listing_and_one_check_per_step_looked_at(bucket):
    bucket.objects = [obj for step in range(10, 110, 10) for obj in step_objects(step)]
    bucket.objects += step_objects(110, written=4)  # the newest save was cut
    assert storage.newest_committed_step(ACTOR, "c") == (100, [110])
    assert bucket.requests == [
        f"list {PREFIX} /",
        f"get {PREFIX}110/commit_success.txt",
        f"get {PREFIX}100/commit_success.txt",
    ]


def test_a_json_object_reads_what_was_written_from_another_process(gcs):
    uri = "gs://bucket/gemma4-26b/trained/run/training_attempts.json"
    first = storage.JsonObject(uri, "c")
    assert first.read() is None and first.generation == 0  # to be created, not overwritten
    first.write({"attempts": [{"attempt": 1}], "first_pre": {"mean_reward": 0.08}})
    again = storage.JsonObject(uri, "c")
    assert again.read() == {"attempts": [{"attempt": 1}], "first_pre": {"mean_reward": 0.08}}
    again.write({"attempts": []})
    assert storage.JsonObject(uri, "c").read() == {"attempts": []}
