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
from typing import Any

from tpu_rl.kube.async_client import AsyncKube, KubeApiError

Watched = tuple[str, list[tuple[str, str]]]  # (collection path, query: a label/field selector)
RETRY_S = 5.0


def _status_of(obj: dict[str, Any]) -> str:
    """What a change must touch to be news: status and suspension, not labels or annotations."""
    return json.dumps([obj.get("status"), (obj.get("spec") or {}).get("suspend")], sort_keys=True)


async def _watch_one(
    connect: Callable[[], Any], watched: Watched, news: asyncio.Event, log: logging.Logger
) -> None:
    path, query = watched
    seen: dict[str, str] = {}  # uid -> status last seen
    version: str | None = None
    loop = asyncio.get_running_loop()
    while True:
        opened = loop.time()
        try:
            async with connect() as client:
                resume = [("resourceVersion", version)] if version else []
                async for event in AsyncKube(client).watch(path, [*query, *resume]):
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":  # 410 Gone: list afresh
                        version = None
                        break
                    meta = obj.get("metadata") or {}
                    version = meta.get("resourceVersion") or version
                    uid, status = meta.get("uid", ""), _status_of(obj)
                    if event.get("type") == "DELETED":
                        seen.pop(uid, None)
                    elif seen.get(uid) == status:
                        continue
                    else:
                        seen[uid] = status
                    news.set()
        except (KubeApiError, ValueError) as error:  # ValueError: a bad or huge event line
            log.debug("Watch of %s: %s; again in %.0fs", path, error, RETRY_S)
            version = None if isinstance(error, ValueError) else version
            await asyncio.sleep(RETRY_S)
        else:
            if loop.time() - opened < 1:  # a server ending watches at once: don't spin
                await asyncio.sleep(RETRY_S)


async def watch_for_news(
    connect: Callable[[], Any],
    watched: Sequence[Watched],
    news: asyncio.Event,
    log: logging.Logger,
) -> None:
    """Set `news` on each status change of the watched objects, until cancelled."""
    tasks = [asyncio.create_task(_watch_one(connect, w, news, log)) for w in watched]
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
) -> Any:
    """Run `watch_for_news` for the duration of the block."""
    task = asyncio.create_task(watch_for_news(connect, watched, news, log))
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
