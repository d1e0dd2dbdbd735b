"""One run at a time converts into a converted model's folder: a lock object on Cloud Storage.

The lock is created only if absent (`if_generation_match=0`: Cloud Storage's request
precondition, https://cloud.google.com/storage/docs/request-preconditions) and names its owner:
the Airflow run, its DAG and deployment, and when the lock expires. Another run finding it
waits until the owner's conversion is committed or the lock goes; a lock whose owner ended
(its DAG run finished, for the same deployment) or expired is stale and replaced, again under
a generation precondition so that two runs replacing it cannot both win. A lock object that
is not one this module writes (a field missing or of another type, an expiry that is not a
finite time) is unreadable: stale, replaced, and said so in a warning.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from tpu_rl.layout import split_gcs_uri

ENDED_RUN_STATES = frozenset({"success", "failed"})
NAMES = ("run_id", "dag_id", "deployment")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LockOwner:
    """Who holds a conversion lock, and until when (epoch seconds) it may hold it."""

    run_id: str
    dag_id: str
    deployment: str
    expires: float

    def same_run(self, other: LockOwner) -> bool:
        return (self.run_id, self.dag_id, self.deployment) == (
            other.run_id,
            other.dag_id,
            other.deployment,
        )

    def describe(self) -> str:
        until = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.expires))
        return (
            f"run {self.run_id!r} of DAG {self.dag_id} (deployment {self.deployment}), "
            f"lock until {until}"
        )


@dataclass(frozen=True)
class Held:
    """The lock as found: its owner (None: unreadable) and the object's generation."""

    owner: LockOwner | None
    generation: int


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is no time")


def parse_owner(data: bytes) -> LockOwner:
    """The owner a lock object names; ValueError saying why it is not a lock this module wrote."""
    found = json.loads(data, parse_constant=_no_constant)  # Infinity, NaN: ValueError
    if not isinstance(found, dict) or sorted(found) != sorted((*NAMES, "expires")):
        raise ValueError(f"not the fields {', '.join((*NAMES, 'expires'))}")
    if not all(isinstance(found[name], str) for name in NAMES):
        raise ValueError(f"{', '.join(NAMES)} must be strings")
    expires = found["expires"]
    if isinstance(expires, bool) or not isinstance(expires, int | float):
        raise ValueError(f"expires is {expires!r}, not epoch seconds")
    try:
        time.gmtime(expires)  # finite, and a time (1e400 reads as inf; 1e300 is no year)
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"expires is {expires!r}, not a time") from None
    return LockOwner(**found)


class ConversionLock:
    """The lock object at `uri`, through a google-cloud-storage client (GCSHook.get_conn())."""

    def __init__(self, client: Any, uri: str) -> None:
        bucket, name = split_gcs_uri(uri)
        self.uri = uri
        self.blob = client.bucket(bucket).blob(name)

    def try_acquire(self, owner: LockOwner, generation: int = 0) -> bool:
        """Write the lock for `owner` if it is still `generation` (0: if there is none): one
        request."""
        from google.api_core.exceptions import PreconditionFailed

        try:
            self.blob.upload_from_string(
                json.dumps(asdict(owner)),
                content_type="application/json",
                if_generation_match=generation,
            )
        except PreconditionFailed:
            return False
        return True

    def held(self) -> Held | None:
        """The lock's owner and generation; None when there is no lock. (Should the lock be
        replaced between the two reads, a removal by this generation is refused: harmless.)"""
        from google.api_core.exceptions import NotFound

        try:
            self.blob.reload()
            generation = int(self.blob.generation)
            data = self.blob.download_as_bytes()
        except NotFound:
            return None
        try:
            owner: LockOwner | None = parse_owner(data)
        except ValueError as error:  # JSONDecodeError and UnicodeDecodeError included
            log.warning("Lock %s is unreadable (%s): taken as stale", self.uri, error)
            owner = None
        return Held(owner, generation)

    def remove(self, generation: int) -> bool:
        """Delete the lock if it is still this generation; False when it changed or went."""
        from google.api_core.exceptions import NotFound, PreconditionFailed

        try:
            self.blob.delete(if_generation_match=generation)
        except (NotFound, PreconditionFailed):
            return False
        return True

    def release(self, owner: LockOwner) -> None:
        """Remove the lock if `owner`'s run holds it."""
        found = self.held()
        if found is not None and found.owner is not None and found.owner.same_run(owner):
            self.remove(found.generation)


def is_stale(
    held: LockOwner | None, me: LockOwner, run_state: Callable[[str, str], str | None]
) -> bool:
    """Whether nobody can be converting under this lock any more: unreadable, expired, or its
    owner's DAG run (same deployment: the one whose run states `run_state` reads) ended."""
    if held is None or held.expires <= time.time():
        return True
    if held.deployment != me.deployment or held.same_run(me):
        return False
    return run_state(held.dag_id, held.run_id) in ENDED_RUN_STATES


def acquire(
    lock: ConversionLock, me: LockOwner, run_state: Callable[[str, str], str | None]
) -> tuple[bool, LockOwner | None]:
    """Take the lock for `me` (a retry of `me`'s run keeps it; a stale lock is replaced):
    (True, None) when taken, else (False, the owner to wait for; None if unreadable)."""
    found: Held | None = None
    for _ in range(3):
        if lock.try_acquire(me):
            return True, None
        found = lock.held()
        if found is None:
            continue  # released meanwhile
        if found.owner is not None and found.owner.same_run(me):  # a retry: renew the expiry
            if lock.try_acquire(me, found.generation):
                return True, None
            continue
        if not is_stale(found.owner, me, run_state):
            return False, found.owner
        lock.remove(found.generation)
    return False, found.owner if found is not None else None
