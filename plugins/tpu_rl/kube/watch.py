"""Kubernetes watches that wake a trigger the moment a watched object's status changes.

A trigger polls on a timer as a backstop, but acts on a watch event at once: a failed Job
or a pod that starts running is seen in well under a second, whatever the poll interval.
What a watch tells goes to a `WatchSink`: one trigger's (`watching`), or every reward wait
of the process (tpu_rl.kube.shared_watch).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tpu_rl.kube.async_client import AsyncKube, KubeApiError

Watched = tuple[str, list[tuple[str, str]]]  # (collection path, query: a label/field selector)
RETRY_S = 5.0


class DebugLog(Protocol):
    """What a watch logs its retries with: a `logging.Logger`, or a trigger's `self.log`
    (Airflow's Logger, airflow/_shared/logging/types.py: `debug(self, event, *args, **kw)`)."""

    def debug(self, message: str, /, *args: Any) -> Any: ...


@dataclass
class Freshness:
    """Whether a watch vouches for the last GET of its objects: `live` while its response is
    open and resumed without a gap, `changed` on a status change (or a gap) since that GET."""

    live: bool = False
    changed: bool = True

    def take(self) -> bool:
        """True when the objects must be read again (and marks them read)."""
        stale, self.changed = self.changed or not self.live, False
        return stale

    def opened(self, resumed: bool) -> None:
        """The watch is open: resumed without a gap, or started afresh (a change may be
        missed between the last GET and now: read again)."""
        self.changed = self.changed or not resumed or not self.live
        self.live = True

    def down(self) -> None:
        self.live, self.changed = False, True


class WatchSink(Protocol):
    """Where one watched collection's news goes."""

    def opened(self, resumed: bool) -> None: ...

    def down(self) -> None: ...

    def saw(self, kind: str, obj: dict[str, Any]) -> None:
        """An ADDED, MODIFIED or DELETED event's object."""


def _status_of(obj: dict[str, Any]) -> int:
    """What a change must touch to be news: status and suspension, not labels or annotations
    (a hash: a shared watch keeps one per object it routes)."""
    status = [obj.get("status"), (obj.get("spec") or {}).get("suspend")]
    return hash(json.dumps(status, sort_keys=True))


@dataclass
class StatusChanges:
    """The status last seen of each object (by uid): an event is news when it changed it."""

    seen: dict[str, int] = field(default_factory=dict)

    def news(self, kind: str, obj: dict[str, Any]) -> bool:
        uid = (obj.get("metadata") or {}).get("uid", "")
        if kind == "DELETED":
            self.seen.pop(uid, None)
            return True
        status = _status_of(obj)
        if self.seen.get(uid) == status:
            return False
        self.seen[uid] = status
        return True

    def forget(self, obj: dict[str, Any]) -> None:
        self.seen.pop((obj.get("metadata") or {}).get("uid", ""), None)


@dataclass
class OneTrigger:
    """One trigger's watch: `news` and `fresh.changed` set on each status change."""

    news: asyncio.Event
    fresh: Freshness
    changes: StatusChanges = field(default_factory=StatusChanges)

    def opened(self, resumed: bool) -> None:
        self.fresh.opened(resumed)

    def down(self) -> None:
        self.fresh.down()

    def saw(self, kind: str, obj: dict[str, Any]) -> None:
        if self.changes.news(kind, obj):
            self.fresh.changed = True
            self.news.set()


async def watch_collection(
    connect: Callable[[], Any], watched: Watched, sink: WatchSink, log: DebugLog
) -> None:
    """Watch one collection into `sink` until cancelled, over one client while it works (each
    server-ended watch is resumed from its resourceVersion on the same client: no new TLS
    session, token or client set-up), over a new one after an error."""
    version: str | None = None
    loop = asyncio.get_running_loop()
    try:
        while True:
            try:
                async with connect() as client:
                    api = AsyncKube(client)
                    while True:
                        opened = loop.time()
                        version = await _watch_once(api, watched, version, sink)
                        if loop.time() - opened < 1:  # a server ending watches at once: wait
                            await asyncio.sleep(RETRY_S)
            except (KubeApiError, ValueError) as error:  # ValueError: a bad or huge event line
                sink.down()
                log.debug("Watch of %s: %s; again in %.0fs", watched[0], error, RETRY_S)
                # 410 Gone: the version is too old to resume from; list afresh
                gone = isinstance(error, ValueError) or error.status == 410
                version = None if gone else version
                await asyncio.sleep(RETRY_S)
    finally:
        sink.down()


async def _watch_once(
    api: AsyncKube, watched: Watched, version: str | None, sink: WatchSink
) -> str | None:
    """One watch request until the server ends it; the resourceVersion to resume from.

    Without a version the watch starts from now (Kubernetes sends the objects as ADDED,
    not what was deleted meanwhile: https://kubernetes.io/docs/reference/using-api/api-concepts/
    #efficient-detection-of-changes), so the objects count as changed then.
    """
    path, query = watched
    resume = [("resourceVersion", version)] if version else []
    events = api.watch(path, [*query, *resume], opened=lambda: sink.opened(version is not None))
    try:
        async for event in events:
            obj = event.get("object") or {}
            if event.get("type") == "ERROR":  # 410 Gone: list afresh
                sink.down()
                return None
            version = (obj.get("metadata") or {}).get("resourceVersion") or version
            sink.saw(event.get("type") or "", obj)
    finally:
        await events.aclose()
    return version


async def watch_for_news(
    connect: Callable[[], Any],
    watched: Sequence[Watched],
    news: asyncio.Event,
    log: DebugLog,
    fresh: Sequence[Freshness] | None = None,
) -> None:
    """Set `news` (and the watched collection's `fresh.changed`) on each status change of
    the watched objects, until cancelled."""
    fresh = fresh or [Freshness() for _ in watched]
    tasks = [
        asyncio.create_task(watch_collection(connect, w, OneTrigger(news, f), log))
        for w, f in zip(watched, fresh, strict=True)
    ]
    try:
        await asyncio.gather(*tasks)
    finally:
        await stop_tasks(tasks)


async def stop_tasks(tasks: Sequence[asyncio.Task[Any]]) -> None:
    """Cancel the tasks and wait for them to end."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


@contextlib.asynccontextmanager
async def watching(
    connect: Callable[[], Any],
    watched: Sequence[Watched],
    news: asyncio.Event,
    log: DebugLog,
    fresh: Sequence[Freshness] | None = None,
) -> Any:
    """Run `watch_for_news` for the duration of the block."""
    task = asyncio.create_task(watch_for_news(connect, watched, news, log, fresh))
    try:
        yield
    finally:
        await stop_tasks([task])


async def news_or_timeout(news: asyncio.Event, seconds: float) -> bool:
    """Wait for the watch's news, at most `seconds` (the poll behind the watch); True on news."""
    try:
        async with asyncio.timeout(max(0.0, seconds)):
            await news.wait()
    except TimeoutError:
        return False
    return True
