"""What the reward poll last read of the cluster: the training Job, its pods, the backend.

Each is read again only when the trigger's watch of it reports a status change, when that
watch is down (or was never started: the sensor's pokes), or every REREAD_S: a poll with
nothing new asks the API nothing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from tpu_rl.kube import objects as kube
from tpu_rl.kube.async_client import AsyncKube, KubeApiError
from tpu_rl.kube.watch import Freshness

# Every object is read again at least this often whatever the watches say: the backstop for
# a change no watch reports (the backend JobSet itself is not watched, its pods are).
REREAD_S = 120.0


@dataclass
class Watched:
    """What the trigger's watches vouch for, each since the poll last read it."""

    job: Freshness = field(default_factory=Freshness)
    pods: Freshness = field(default_factory=Freshness)
    backend: Freshness = field(default_factory=Freshness)

    def all(self) -> tuple[Freshness, ...]:
        return self.job, self.pods, self.backend


class ClusterView:
    """The last answers about the Job, its pods and the backend, and when to ask again."""

    def __init__(self, namespace: str, job_name: str, backend_jobset_name: str | None) -> None:
        self.namespace = namespace
        self.job_name = job_name
        self.backend_jobset_name = backend_jobset_name
        self.watched = Watched()
        self._read_at: float | None = None  # monotonic time every object was last read
        self._reread = True
        self._job: dict[str, Any] | None = None
        self._pods: list[dict[str, Any]] = []
        self._backend: tuple[dict[str, Any] | None, list[dict[str, Any]]] = (None, [])

    def start_poll(self) -> None:
        """Decide whether this poll reads everything again (the REREAD_S backstop)."""
        now = time.monotonic()
        self._reread = self._read_at is None or now - self._read_at >= REREAD_S
        if self._reread:
            self._read_at = now

    def forget(self) -> None:
        """A poll failed midway: read everything it was reading again next time."""
        for watched in self.watched.all():
            watched.changed = True

    async def job(self, api: AsyncKube) -> dict[str, Any] | None:
        if self.watched.job.take() or self._reread:
            self._job = await api.get_optional(kube.job_path(self.namespace, self.job_name))
        return self._job

    async def pods(self, api: AsyncKube, *, again: bool = False) -> list[dict[str, Any]]:
        """The Job's pods; `again`: read them whatever the watch vouches for."""
        if self.watched.pods.take() or self._reread or again:
            selector = f"job-name={self.job_name}"
            self._pods = await api.list_items(kube.pods_path(self.namespace), selector)
        return self._pods

    async def backend(self, api: AsyncKube) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """The backend JobSet (None: deleted) and its pods."""
        name = self.backend_jobset_name or ""
        if self.watched.backend.take() or self._reread:
            jobset = await api.get_optional(kube.jobset_path(self.namespace, name))
            pods: list[dict[str, Any]] = []
            if jobset is not None:
                selector = f"{kube.JOBSET_NAME_LABEL}={name}"
                pods = await api.list_items(kube.pods_path(self.namespace), selector)
            self._backend = (jobset, pods)
        return self._backend

    async def events(self, api: AsyncKube, pod: dict[str, Any] | None) -> str:
        """The latest few event messages about the pod (or the Job when there is no pod)."""
        name = pod["metadata"]["name"] if pod else self.job_name
        query = [("fieldSelector", f"involvedObject.name={name}")]
        try:
            body = await api.get_json(f"{kube.ns_path(self.namespace)}/events", query)
        except KubeApiError as error:
            return f"(events not available: {error})"
        items = sorted(
            body.get("items") or [],
            key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "",
        )
        return "; ".join(
            f"{e.get('reason', '')}: {e.get('message', '')}".strip(": ") for e in items[-3:]
        )
