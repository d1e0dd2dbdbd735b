"""The conversion lock: created only if absent, kept by its own run's retry, replaced when
stale, waited for while its run lives."""

from __future__ import annotations

import time

import pytest
from google.api_core.exceptions import NotFound, PreconditionFailed

from tpu_rl import conversion_lock as cl


class FakeBlob:
    """One object with Cloud Storage's generation preconditions (generations never repeat)."""

    def __init__(self) -> None:
        self.data: bytes | None = None
        self.generation: int | None = None
        self.live = 0  # the stored object's generation (0: none)
        self.last = 0

    def upload_from_string(self, data: str, content_type: str, if_generation_match: int) -> None:
        if if_generation_match != self.live:
            raise PreconditionFailed("conditionNotMet")
        self.last += 1
        self.data, self.live = data.encode(), self.last

    def reload(self) -> None:
        if not self.live:
            raise NotFound("no lock")
        self.generation = self.live

    def download_as_bytes(self) -> bytes:
        if self.data is None:
            raise NotFound("no lock")
        return self.data

    def delete(self, if_generation_match: int) -> None:
        if not self.live:
            raise NotFound("no lock")
        if if_generation_match != self.live:
            raise PreconditionFailed("conditionNotMet")
        self.data, self.live = None, 0


class FakeClient:
    """A storage client whose one bucket holds one object: the lock."""

    def __init__(self) -> None:
        self.object = FakeBlob()

    def bucket(self, name: str) -> FakeClient:
        return self

    def blob(self, name: str) -> FakeBlob:
        return self.object


def lock() -> cl.ConversionLock:
    return cl.ConversionLock(FakeClient(), "gs://b/m/max-text-format/k/conversion.lock")


def owner(run_id: str, expires_in: float = 3600, deployment: str = "d1") -> cl.LockOwner:
    return cl.LockOwner(run_id, "tpu_rl_post_training", deployment, time.time() + expires_in)


def running(dag_id: str, run_id: str) -> str:
    return "running"


def ended(dag_id: str, run_id: str) -> str:
    return "failed"


def test_the_first_run_takes_it_and_a_second_waits_for_the_first():
    folder, first, second = lock(), owner("run-1"), owner("run-2")
    assert cl.acquire(folder, first, running) == (True, None)
    assert cl.acquire(folder, second, running) == (False, first)


def test_a_retry_of_the_owner_keeps_it_and_renews_it():
    folder, first = lock(), owner("run-1")
    cl.acquire(folder, first, running)
    later = owner("run-1", expires_in=7200)
    assert cl.acquire(folder, later, running) == (True, None)
    assert folder.held().owner == later


def test_a_lock_whose_run_ended_or_expired_is_replaced():
    folder = lock()
    cl.acquire(folder, owner("run-1"), running)
    assert cl.acquire(folder, owner("run-2"), ended) == (True, None)
    assert folder.held().owner.run_id == "run-2"
    expired = lock()
    cl.acquire(expired, owner("run-1", expires_in=-1, deployment="other"), running)
    assert cl.acquire(expired, owner("run-3"), running) == (True, None)


def test_another_deployments_live_run_is_waited_for_until_its_lock_expires():
    folder, theirs = lock(), owner("run-1", deployment="other")
    cl.acquire(folder, theirs, ended)  # its DAG runs are not ours to read
    assert cl.acquire(folder, owner("run-2"), ended) == (False, theirs)


def test_release_removes_only_the_owners_lock():
    folder, first = lock(), owner("run-1")
    cl.acquire(folder, first, running)
    folder.release(owner("run-2"))
    assert folder.held() is not None
    folder.release(first)
    assert folder.held() is None


@pytest.mark.parametrize(
    "content",
    [
        '{"run_id": "r", "dag_id": "d", "deployment": "other", "expires": "tomorrow"}',
        '{"run_id": "r", "dag_id": "d", "deployment": "other", "expires": Infinity}',
        '{"run_id": "r", "dag_id": "d", "deployment": "other", "expires": NaN}',
        '{"run_id": "r", "dag_id": "d", "deployment": "other", "expires": 1e400}',
        '{"run_id": "r", "dag_id": "d", "deployment": "other", "expires": 1e300}',
        '{"run_id": 7, "dag_id": "d", "deployment": "other", "expires": 1}',
        '["run_id"]',
        "\xff not json",
    ],
)
def test_a_lock_that_is_not_ours_is_stale_and_said_so(content, caplog):
    """An expiry that is no number does not crash the conversion; Infinity and NaN (which
    Python's json reads) do not make a lock never stale, which would leave the conversion
    waiting forever."""
    folder = lock()
    folder.blob.upload_from_string(content, "application/json", if_generation_match=0)
    assert cl.acquire(folder, owner("run-2"), running) == (True, None)
    assert folder.held().owner.run_id == "run-2"
    [warning] = [r.getMessage() for r in caplog.records if "unreadable" in r.getMessage()]
    assert warning.startswith(f"Lock {folder.uri} is unreadable (") and "\n" not in warning
