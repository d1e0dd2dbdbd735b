"""The training pod's log, read from the last position on: one stream kept open, or a GET.

Knows which pod and container instance it follows: a replaced pod or restarted container
is read from its start (after the old instance's unread tail).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tpu_rl.kube import objects as kube
from tpu_rl.kube import verdicts
from tpu_rl.kube.async_client import REQUEST_TIMEOUT_S, STREAM_TIMEOUT, AsyncKube, KubeApiError
from tpu_rl.rewards.held_log import Log
from tpu_rl.rewards.line_reader import Line, Resent, consume, since_time, time_key
from tpu_rl.rewards.log_stream import LogStream
from tpu_rl.watch.ends import Result
from tpu_rl.watch.state import FollowState

# How long a trigger ending with a progress report lets its stream read on to the start of a
# second of the log (PodLogReader.settle): a second of log has begun by then, unless the
# training logged nothing, at a delivery lag under a second.
SETTLE_S = 2.0


def logged_since_asked(state: FollowState) -> Callable[[], bool]:
    """True when a line was logged (a reward line, a cut line, a finished save: the stop at a
    save is judged) since the last call: the position is worth saving then, not after every
    chunk (a poll and a Job patch per log line otherwise)."""

    def seen() -> tuple[int, int, float | None]:
        return state.reward_lines, state.cut_lines, state.saved[0] if state.saved else None

    logged = seen()

    def asked() -> bool:
        nonlocal logged
        now = seen()
        moved, logged = now != logged, now
        return moved

    return asked


@dataclass(eq=False)
class PodLogReader:
    """Reads the followed pod's new lines into `state`; with `stream_log` the log is one
    `follow=true` response pumped in the background (set `news` on progress), else a GET."""

    connect: Callable[[], Any]  # a client for a response left open (the followed log)
    namespace: str
    container_name: str | None
    state: FollowState
    log: Log  # HeldLog: said once a saved position covers the lines
    stream_log: bool
    news: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    bytes_read: int = field(default=0, init=False)
    _stream: LogStream | None = field(default=None, init=False)
    # the position (last_time, seen_at_last_time) after the last chunk that began a new second
    _second_begun: tuple[str | None, int] | None = field(default=None, init=False)

    async def close(self) -> None:
        """Close the log stream, if one is open."""
        if self._stream is not None:
            stream, self._stream = self._stream, None
            self.bytes_read += stream.bytes_read
            await stream.close()

    def found(self) -> Result | None:
        """The result the open stream has found, if any (no API call)."""
        return self._stream.result if self._stream else None

    async def settle(self, timeout: float) -> None:
        """Before the stream is closed for good and the position handed on: read on until a
        chunk begins a new second of the log (or the result, the stream's end, `timeout`). The
        next reader asks from `sinceTime`, that second (whole seconds: `since_time`), and is sent
        again every line of it consumed so far: that chunk's lines, not up to a second of log."""
        if self._stream is not None and self._stream.result is None:
            await self._stream.read_until(self._at_second_start, timeout)

    def _at_second_start(self) -> bool:
        """No line consumed since the chunk that began the last consumed line's second."""
        state = self.state
        position = (state.last_time, state.seen_at_last_time)
        return state.last_time is None or position == self._second_begun

    def _consume(self, state: FollowState, lines: list[Line], resent: Resent) -> Result | None:
        """`consume` one chunk's lines, noting the position when they began a new second."""
        second = time_key(state.last_time)[0] if state.last_time else None
        result = consume(state, lines, resent, self.log)
        if state.last_time and time_key(state.last_time)[0] != second:
            self._second_begun = (state.last_time, state.seen_at_last_time)
        return result

    async def follow(
        self, api: AsyncKube, pod: dict[str, Any], pods: list[dict[str, Any]], final: bool = False
    ) -> Result | None:
        """Read the followed pod's new lines; move on to a newer pod once it has finished.
        `final`: the Job succeeded, so its log is read to its end whatever the pod shows."""
        result = await self._read_pod(api, pod, final)
        newest = max(pods, key=verdicts.recency)
        if result is None and verdicts.phase(pod) in verdicts.FINISHED and newest is not pod:
            result = await self._read_pod(api, newest, final)
        return result

    async def catch_up(self, api: AsyncKube, pod: dict[str, Any]) -> Result | None:
        """Read the followed pod's log to its end now, with one GET: the lines an open stream
        has not delivered yet (a rebuilt trigger's backlog, logged while no trigger ran) are
        consumed before this returns; the next read opens a new stream from there. The result
        the stream found is kept: its position is past that line."""
        if (result := self.found()) is not None:
            return result
        await self.close()
        return await self._read_pod(api, pod, final=False, get=True)

    async def _read_pod(
        self, api: AsyncKube, pod: dict[str, Any], final: bool, get: bool = False
    ) -> Result | None:
        meta, state = pod["metadata"], self.state
        container = self.container(pod)
        status: dict[str, Any] = next(
            (
                s
                for s in (pod.get("status") or {}).get("containerStatuses") or []
                if s.get("name") == container
            ),
            {},
        )
        restarts, container_id = status.get("restartCount"), status.get("containerID")
        replaced = meta.get("uid") != state.pod_uid
        if replaced or self._restarted(restarts, container_id):
            await self.close()  # the stream's instance is over: no more lines from it
        if replaced:
            if state.pod_uid is not None:
                self.log.info(
                    "Pod %s was replaced by %s; reading its log from the start",
                    state.pod_name,
                    meta.get("name"),
                )
            state.pod_uid, state.pod_name = meta.get("uid"), meta.get("name")
            state.start_container(None, None)
        elif self._restarted(restarts, container_id):
            self.log.info(
                "Container %s of pod %s restarted (restartCount %s); reading its new log",
                container,
                meta.get("name"),
                restarts,
            )
            if restarts == (state.restart_count or 0) + 1 and state.last_time:
                result = await self._read_log(api, pod, container, previous=True, final=True)
                if result is not None:
                    return result
            state.start_container(restarts, container_id)
        if restarts is not None:
            state.restart_count, state.container_id = restarts, container_id
        phase_state = status.get("state") or {}
        if "waiting" in phase_state or (not phase_state and verdicts.phase(pod) == "Pending"):
            return None
        final = final or "terminated" in phase_state
        return await self._read_log(api, pod, container, final=final, get=get)

    def _restarted(self, restarts: int | None, container_id: str | None) -> bool:
        known = self.state.restart_count
        if known is None or restarts is None:
            return False
        return restarts != known or bool(
            container_id and self.state.container_id and container_id != self.state.container_id
        )

    def container(self, pod: dict[str, Any]) -> str:
        if self.container_name:
            return self.container_name
        names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        if len(names) != 1:
            raise KubeApiError(
                400, f"pod {verdicts.pod_name(pod)} has containers {names}: set container_name"
            )
        return str(names[0])

    async def _read_log(
        self,
        api: AsyncKube,
        pod: dict[str, Any],
        container: str,
        *,
        previous: bool = False,
        final: bool = False,
        get: bool = False,
    ) -> Result | None:
        """Consume the lines from the last position's second on (a stream kept open, or one
        GET: `get` even when streaming); a trailing partial line is left for the next read
        unless the container ended."""
        state = self.state
        instance = (state.pod_uid, container, state.restart_count, state.container_id, previous)
        follow = self.stream_log and not previous and not get
        if self._stream is None or self._stream.instance != instance:
            await self.close()
            query = [("container", container), ("timestamps", "true")]
            query += [("previous", "true")] if previous else [("follow", "true")] if follow else []
            if state.last_time:
                query.append(("sinceTime", since_time(state.last_time)))
            resent = Resent(state.seen_at_last_time)
            try:
                self._stream = await LogStream.open(
                    self.connect,
                    kube.pod_log_path(self.namespace, pod["metadata"]["name"]),
                    query,
                    STREAM_TIMEOUT if follow else REQUEST_TIMEOUT_S,
                    instance=instance,
                    consume=lambda lines: self._consume(state, lines, resent),
                    news=self.news,
                    progressed=logged_since_asked(state),
                )
            except KubeApiError as error:
                if error.status == 400:  # container not started yet, or no previous instance
                    self.log.debug("Log not readable yet: %s", error)
                    return None
                raise
        stream = self._stream
        if final or not follow:
            await stream.until_end(REQUEST_TIMEOUT_S)
        result = stream.outcome(final=final)
        if stream.ended or not follow:
            await self.close()
        return result
