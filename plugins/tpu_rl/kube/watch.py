"""Kubernetes watches that wake a trigger the moment a watched object's status changes.

A trigger polls on a timer as a backstop, but acts on a watch event at once: a failed Job
or a pod that starts running is seen in well under a second, whatever the poll interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tpu_rl.kube.async_client import AsyncKube, KubeApiError

Watched = tuple[str, list[tuple[str, str]]]  # (collection path, query: a label/field selector)
RETRY_S = 5.0


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


def _status_of(obj: dict[str, Any]) -> str:
    """What a change must touch to be news: status and suspension, not labels or annotations."""
    return json.dumps([obj.get("status"), (obj.get("spec") or {}).get("suspend")], sort_keys=True)


async def _watch_one(
    connect: Callable[[], Any],
    watched: Watched,
    news: asyncio.Event,
    log: logging.Logger,
    fresh: Freshness,
) -> None:
    """Watch one collection, over one client while it works (each server-ended watch is
    resumed from its resourceVersion on the same client: no new TLS session, token or
    client set-up), over a new one after an error."""
    seen: dict[str, str] = {}  # uid -> status last seen
    version: str | None = None
    loop = asyncio.get_running_loop()
    try:
        while True:
            try:
                async with connect() as client:
                    api = AsyncKube(client)
                    while True:
                        opened = loop.time()
                        version = await _watch_once(api, watched, version, seen, news, fresh)
                        if loop.time() - opened < 1:  # a server ending watches at once: wait
                            await asyncio.sleep(RETRY_S)
            except (KubeApiError, ValueError) as error:  # ValueError: a bad or huge event line
                fresh.live, fresh.changed = False, True
                log.debug("Watch of %s: %s; again in %.0fs", watched[0], error, RETRY_S)
                # 410 Gone: the version is too old to resume from; list afresh
                gone = isinstance(error, ValueError) or error.status == 410
                version = None if gone else version
                await asyncio.sleep(RETRY_S)
    finally:
        fresh.live = False


async def _watch_once(
    api: AsyncKube,
    watched: Watched,
    version: str | None,
    seen: dict[str, str],
    news: asyncio.Event,
    fresh: Freshness,
) -> str | None:
    """One watch request until the server ends it; the resourceVersion to resume from.

    Without a version the watch starts from now (Kubernetes sends the objects as ADDED,
    not what was deleted meanwhile: https://kubernetes.io/docs/reference/using-api/api-concepts/
    #efficient-detection-of-changes), so the objects count as changed then.
    """
    path, query = watched
    resume = [("resourceVersion", version)] if version else []
    events = api.watch(path, [*query, *resume], opened=lambda: _opened(fresh, version))
    try:
        async for event in events:
            obj = event.get("object") or {}
            if event.get("type") == "ERROR":  # 410 Gone: list afresh
                fresh.live, fresh.changed = False, True
                return None
            meta = obj.get("metadata") or {}
            version = meta.get("resourceVersion") or version
            uid, status = meta.get("uid", ""), _status_of(obj)
            if event.get("type") == "DELETED":
                seen.pop(uid, None)
            elif seen.get(uid) == status:
                continue
            else:
                seen[uid] = status
            fresh.changed = True
            news.set()
    finally:
        await events.aclose()
    return version


def _opened(fresh: Freshness, version: str | None) -> None:
    fresh.changed = fresh.changed or version is None or not fresh.live
    fresh.live = True


async def watch_for_news(
    connect: Callable[[], Any],
    watched: Sequence[Watched],
    news: asyncio.Event,
    log: logging.Logger,
    fresh: Sequence[Freshness] | None = None,
) -> None:
    """Set `news` (and the watched collection's `fresh.changed`) on each status change of
    the watched objects, until cancelled."""
    fresh = fresh or [Freshness() for _ in watched]
    tasks = [
        asyncio.create_task(_watch_one(connect, w, news, log, f))
        for w, f in zip(watched, fresh, strict=True)
    ]
    try:
        await asyncio.gather(*tasks)
    finally:
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
    log: logging.Logger,
    fresh: Sequence[Freshness] | None = None,
) -> Any:
    """Run `watch_for_news` for the duration of the block."""
    task = asyncio.create_task(watch_for_news(connect, watched, news, log, fresh))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


async def news_or_timeout(news: asyncio.Event, seconds: float) -> bool:
    """Wait for the watch's news, at most `seconds` (the poll behind the watch); True on news."""
    try:
        async with asyncio.timeout(max(0.0, seconds)):
            await news.wait()
    except TimeoutError:
        return False
    return True
