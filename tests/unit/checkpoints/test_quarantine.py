"""Moving a run's poisoned saves aside (tpu_rl.checkpoints.quarantine) on a client that keeps
objects in a dict: the folder beside checkpoints/, each step copied then deleted commit file
first, a rewrite followed to its end. Against the GCS emulator: tests/integration/
test_quarantine.py."""

from __future__ import annotations

from typing import Any

import pytest

from tpu_rl import storage
from tpu_rl.checkpoints import quarantine

ACTOR = "gs://b/m/trained/rl-1/checkpoints/actor/"


def test_the_quarantine_is_beside_the_checkpoints_folder():
    expected = "gs://b/m/trained/rl-1/quarantine/"
    assert quarantine.quarantine_dir(ACTOR) == expected
    assert quarantine.quarantine_dir(ACTOR.rstrip("/")) == expected


class Bucket:
    """google.cloud.storage's client, buckets and blobs over one dict of names; a rewrite takes
    `rewrite_calls` calls; every call is recorded."""

    def __init__(self, names: list[str], rewrite_calls: int = 1) -> None:
        self.objects = dict.fromkeys(names, "b")
        self.rewrite_calls, self.calls = rewrite_calls, []

    def list_blobs(self, bucket: str, prefix: str) -> list[Any]:
        return [Blob(self, bucket, n) for n in sorted(self.objects) if n.startswith(prefix)]

    def bucket(self, bucket: str) -> Any:
        return type("B", (), {"blob": lambda _, name: Blob(self, bucket, name)})()


class Blob:
    def __init__(self, store: Bucket, bucket: str, name: str) -> None:
        self.store, self.bucket, self.name = store, bucket, name

    def rewrite(self, source: Blob, token: str | None = None) -> tuple[str | None, int, int]:
        done = int(token or 0) + 1
        self.store.calls.append(("rewrite", source.name, self.name, token))
        if done < self.store.rewrite_calls:
            return str(done), 0, 0
        self.store.objects[self.name] = self.bucket
        return None, 0, 0

    def delete(self) -> None:
        self.store.calls.append(("delete", self.name))
        del self.store.objects[self.name]


def step(number: int) -> list[str]:
    prefix = f"m/trained/rl-1/checkpoints/actor/{number}/"
    return [f"{prefix}a/0", f"{prefix}{storage.COMMIT_FILE}", f"{prefix}z/1"]


@pytest.fixture
def bucket(monkeypatch) -> Bucket:
    made = Bucket(step(25) + step(50) + step(75), rewrite_calls=2)
    monkeypatch.setattr(quarantine, "_client", lambda gcp_conn_id: made)
    return made


def test_each_step_is_copied_aside_then_deleted_its_commit_file_first(bucket):
    assert quarantine.quarantine_steps(ACTOR, "c", [50, 75]) == (
        "gs://b/m/trained/rl-1/quarantine/"
    )
    assert sorted(bucket.objects) == sorted(
        step(25) + [n.replace("checkpoints/actor/", "quarantine/") for n in step(50) + step(75)]
    )
    deletes = [name for call, name, *_ in bucket.calls if call == "delete"]
    assert deletes[0].endswith("50/commit_success.txt")
    assert deletes[3].endswith("75/commit_success.txt")
    copy = [c for c in bucket.calls if c[0] == "rewrite" and c[1].endswith("50/a/0")]
    assert [token for *_, token in copy] == [None, "1"]  # followed until GCS says done


def test_the_poisoned_steps_are_those_at_or_after_the_anomaly(monkeypatch):
    monkeypatch.setattr(storage, "checkpoint_steps", lambda uri, conn: [25, 50, 75])
    assert quarantine.steps_from(ACTOR, "c", 50) == [50, 75]
    assert quarantine.steps_from(ACTOR, "c", 100) == []
