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

from tpu_rl.kube.watch import Freshness, StatusChanges, Watched, stop_tasks, watch_collection

# Not a trigger's log: a watch outlives the wait that started it.
LOG = logging.getLogger(__name__)
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


class Subscriber:
    """One wait's subscriptions: joined to the watches the process has at once, to the
    others (started for it) when `start()` is called."""

    def __init__(
        self,
        connect: Callable[[], Any],
        connection: Hashable,
        subscriptions: Sequence[Subscription],
    ) -> None:
        self.connect = connect
        self.connection = connection
        self.waiting = list(subscriptions)
        self.joined: list[tuple[SharedWatch, Subscription]] = []
        self._watches = _WATCHES.setdefault(asyncio.get_running_loop(), {})
        self._join(start=False)

    def start(self) -> None:
        """Start the watches no other wait has started, and join them."""
        self._join(start=True)

    def _join(self, *, start: bool) -> None:
        for sub in list(self.waiting):
            key = (self.connection, sub.path)
            if (watch := self._watches.get(key)) is None:
                if not start:
                    continue
                watch = self._watches[key] = SharedWatch(sub.path)
                watched: Watched = (sub.path, [])
                watch.task = asyncio.create_task(
                    watch_collection(self.connect, watched, watch, LOG)
                )
            watch.add(sub)
            self.waiting.remove(sub)
            self.joined.append((watch, sub))

    async def leave(self) -> None:
        """Leave every watch joined; stop those no wait is left on."""
        ended = []
        for watch, sub in self.joined:
            watch.remove(sub)
            key = (self.connection, watch.path)
            if watch.empty and self._watches.get(key) is watch:
                del self._watches[key]
                ended += [watch.task] if watch.task else []
        self.joined = []
        await stop_tasks(ended)


@contextlib.asynccontextmanager
async def subscribed(
    connect: Callable[[], Any],
    connection: Hashable,
    subscriptions: Sequence[Subscription],
) -> AsyncIterator[Subscriber]:
    """Hear of the subscriptions' objects for the duration of the block, over the process's
    watch of each collection on that `connection` (the cluster and the credentials: waits
    that authenticate differently never share one): the watches already there at once,
    the others once `start()` is called (started with `connect`). A watch stops when its
    last subscriber leaves."""
    subscriber = Subscriber(connect, connection, subscriptions)
    try:
        yield subscriber
    finally:
        await subscriber.leave()
