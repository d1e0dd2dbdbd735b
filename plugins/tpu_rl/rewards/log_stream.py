"""One pod log response read as it arrives, its lines consumed at once, in bounded memory."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import aiohttp

from tpu_rl.kube.async_client import AsyncKube, KubeApiError
from tpu_rl.rewards.line_reader import Line, LineCutter
from tpu_rl.watch.ends import Result

Consumer = Callable[[list[Line]], "Result | None"]
# Log read since the last news this long is a burst worth saving the position past at once (a
# poll within MIN_POLL_GAP_S, one PATCH): a triggerer killed right after a burst of lines with
# no reward line among them has its successor read again at most this much of it, not the
# whole burst. At the sandbox's 2 lines a second that is about a save a minute.
SAVE_EVERY_BYTES = 16 * 1024


class LogStream:
    """A log GET (`follow=true` or not) pumped in the background until it ends or has the result.

    Each chunk is cut into lines and handed to `consume` right away: nothing piles up between
    polls, however long they are apart. `news` is set when the result is found, the stream
    ends, or a chunk made progress worth saving (`consume` returns nothing then, but the
    caller's `progressed()` says so, or SAVE_EVERY_BYTES were read since the last news).
    """

    def __init__(
        self,
        instance: tuple[Any, ...],
        connection: contextlib.AsyncExitStack,
        response: aiohttp.ClientResponse,
        consume: Consumer,
        news: asyncio.Event,
        progressed: Callable[[], bool] = lambda: False,
    ) -> None:
        self.instance = instance  # (pod uid, container, restart count, container id)
        self.result: Result | None = None
        self.ended = False
        self.bytes_read = 0
        self._connection = connection
        self._response = response
        self._consume = consume
        self._news = news
        self._progressed = progressed
        self._enough: Callable[[], bool] = lambda: False  # read_until's: read no more chunks
        self._cutter = LineCutter()
        self._error: BaseException | None = None
        self._task = asyncio.create_task(self._pump())

    @classmethod
    async def open(
        cls,
        connect: Callable[[], Any],
        path: str,
        query: list[tuple[str, str]],
        timeout: Any,
        **kwargs: Any,
    ) -> LogStream:
        """Send the GET over a connection of its own (`connect()`: the hook's get_conn)."""
        connection = contextlib.AsyncExitStack()
        try:
            client = await connection.enter_async_context(connect())
            response = await AsyncKube(client).open(path, query, timeout)
        except BaseException:
            await connection.aclose()
            raise
        connection.callback(response.close)
        return cls(connection=connection, response=response, **kwargs)

    async def _pump(self) -> None:
        unsaid = 0  # bytes read since the last news
        try:
            async for chunk in self._response.content.iter_any():
                self.bytes_read += len(chunk)
                unsaid += len(chunk)
                self.result = self._consume(self._cutter.feed(chunk))
                if self.result is not None or self._progressed() or unsaid >= SAVE_EVERY_BYTES:
                    unsaid = 0
                    self._news.set()
                if self.result is not None or self._enough():
                    return
        except (aiohttp.ClientError, TimeoutError):  # broken, or silent past sock_read
            pass
        except Exception as error:  # handed to the poll that reads this stream
            self._error = error
        self.ended = True
        self._news.set()

    async def until_end(self, timeout: float) -> None:
        """Wait for the server to end the stream (the container has ended)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._task)

    async def read_until(self, enough: Callable[[], bool], timeout: float) -> None:
        """Read on until `enough()` holds after a chunk (then read no more chunks: close the
        stream next), the result is found or the stream ends; for at most `timeout` seconds."""
        self._enough = enough
        if not enough():
            await self.until_end(timeout)

    def outcome(self, *, final: bool) -> Result | None:
        """The result found so far; with `final` and an ended stream, the last partial line
        is read too (a line cut off by a broken connection is read again instead)."""
        if self._error is not None:
            if isinstance(self._error, KubeApiError):
                raise self._error
            raise RuntimeError(f"reading the log failed: {self._error}") from self._error
        if self.result is None and final and self.ended and (tail := self._cutter.flush()):
            self.result = self._consume([tail])
        return self.result

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self._connection.aclose()
