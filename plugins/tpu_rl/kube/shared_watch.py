"""One watch per cluster, namespace and kind for every reward wait of a triggerer process.

A triggerer runs many waits in one event loop (Airflow's jobs/triggerer_job_runner.py,
TriggerRunner: every trigger a task of one loop). Each wait watching its own Job, its pods
and its backend's pods held three open TLS connections (256 KiB of read buffer each:
asyncio/sslproto.py, SSLProtocol) and their requests. Here a namespace's Jobs and pods are
watched once, whoever waits, and each event goes to the waits it concerns: by the object's
name or by one of its labels, as each wait's selector `key=value` said.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from tpu_rl.kube.watch import Freshness, StatusChanges, stop_tasks, watch_collection

NAME = "metadata.name"  # a subscription by object name (as fieldSelector metadata.name=...)


@dataclass(eq=False)
class Subscription:
    """One wait's interest in a collection's objects whose `key` (NAME or a label) is
    `value`: on a status change of one, `fresh.changed` and `news` are set."""

    path: str  # the namespace's collection, e.g. /api/v1/namespaces/ns/pods
    key: str
    value: str
    news: asyncio.Event
    fresh: Freshness


class SharedWatch:
    """A collection watched for every subscriber, each event routed to those it concerns."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.live = False
        self.task: asyncio.Task[None] | None = None
        self._by_match: dict[tuple[str, str], set[Subscription]] = {}
        self._changes = StatusChanges()

    @property
    def empty(self) -> bool:
        return not self._by_match

    def add(self, sub: Subscription) -> None:
        """From now on the subscriber hears of its objects; its next poll reads them (what
        changed before it joined is not known)."""
        self._by_match.setdefault((sub.key, sub.value), set()).add(sub)
        sub.fresh.live, sub.fresh.changed = self.live, True

    def remove(self, sub: Subscription) -> None:
        subs = self._by_match.get((sub.key, sub.value), set())
        subs.discard(sub)
        if not subs:
            self._by_match.pop((sub.key, sub.value), None)
        sub.fresh.live = False

    def _subscribers(self) -> list[Subscription]:
        return [sub for subs in self._by_match.values() for sub in subs]

    def opened(self, resumed: bool) -> None:
        self.live = True
        for sub in self._subscribers():
            sub.fresh.opened(resumed)

    def down(self) -> None:
        self.live = False
        for sub in self._subscribers():
            sub.fresh.down()

    def saw(self, kind: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        matches = [(NAME, meta.get("name")), *(meta.get("labels") or {}).items()]
        concerned = [sub for m in matches for sub in self._by_match.get(m, ())]
        if not concerned:  # nobody waits on it: no status kept either
            self._changes.forget(obj)
            return
        if self._changes.news(kind, obj):
            for sub in concerned:
                sub.fresh.changed = True
                sub.news.set()


# Per event loop (a test runs several), per (connection, collection path).
_WATCHES: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[Hashable, str], SharedWatch]
] = weakref.WeakKeyDictionary()


def _shared(connection: Hashable, path: str) -> tuple[dict[Any, SharedWatch], SharedWatch]:
    watches = _WATCHES.setdefault(asyncio.get_running_loop(), {})
    if (watch := watches.get((connection, path))) is None:
        watch = watches[(connection, path)] = SharedWatch(path)
    return watches, watch


@contextlib.asynccontextmanager
async def subscribed(
    connect: Callable[[], Any],
    connection: Hashable,
    subscriptions: Sequence[Subscription],
    log: logging.Logger,
) -> AsyncIterator[None]:
    """Hear of the subscriptions' objects for the duration of the block, over the process's
    watch of each collection on that `connection` (the cluster and the credentials: waits
    that authenticate differently never share one), started by its first subscriber with
    `connect` and stopped when its last leaves."""
    joined: list[tuple[dict[Any, SharedWatch], SharedWatch, Subscription]] = []
    try:
        for sub in subscriptions:
            watches, watch = _shared(connection, sub.path)
            watch.add(sub)
            joined.append((watches, watch, sub))
            if watch.task is None:
                watched = (sub.path, [])
                watch.task = asyncio.create_task(watch_collection(connect, watched, watch, log))
        yield
    finally:
        ended = []
        for watches, watch, sub in joined:
            watch.remove(sub)
            if watch.empty and watches.get((connection, watch.path)) is watch:
                del watches[(connection, watch.path)]
                ended += [watch.task] if watch.task else []
        await stop_tasks(ended)
