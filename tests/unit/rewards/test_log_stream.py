"""One pod log response read as it arrives (tpu_rl.rewards.log_stream), on a response whose
chunks are given: lines consumed at once, the news, the end, a failed read. A stream from the
API emulator: tests/integration/test_reward_burst.py."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp
import pytest

from tpu_rl.kube.async_client import KubeApiError
from tpu_rl.rewards import log_stream
from tpu_rl.rewards.line_reader import Line
from tpu_rl.rewards.log_stream import LogStream


class Chunks:
    """An aiohttp response's content: the chunks, then an error when one is given."""

    def __init__(self, chunks: list[bytes], error: BaseException | None = None) -> None:
        self.chunks, self.error = chunks, error

    async def iter_any(self) -> Any:
        for chunk in self.chunks:
            yield chunk
            await asyncio.sleep(0)
        if self.error is not None:
            raise self.error


class Found:
    """A consumer whose result is the first line saying `Post`; every line it was handed."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, lines: list[Line]) -> dict[str, Any] | None:
        self.lines += [line.text for line in lines]
        return next(({"post": line.text} for line in lines if "Post" in line.text), None)


def stream(chunks: Chunks, consume: Found, news: asyncio.Event) -> LogStream:
    response = type("Response", (), {"content": chunks})()
    return LogStream(
        instance=("uid", "c", 0, "cid"),
        connection=contextlib.AsyncExitStack(),
        response=response,  # type: ignore[arg-type]
        consume=consume,
        news=news,
    )


async def test_the_result_is_found_as_its_chunk_arrives_and_reading_stops():
    found, news = Found(), asyncio.Event()
    read = stream(Chunks([b"step 1\nPo", b"st RL Training\nnever read\n"]), found, news)
    await read.until_end(5)
    assert read.outcome(final=False) == {"post": "Post RL Training"}
    assert found.lines == ["step 1", "Post RL Training", "never read"]  # the chunk's lines
    assert news.is_set() and not read.ended
    await read.close()


async def test_an_ended_stream_reads_its_last_partial_line_only_when_final():
    found, news = Found(), asyncio.Event()
    read = stream(Chunks([b"step 1\n", b"Post cut"]), found, news)
    await read.until_end(5)
    assert read.ended and news.is_set()
    assert read.outcome(final=False) is None
    assert read.outcome(final=True) == {"post": "Post cut"}
    assert read.bytes_read == len(b"step 1\nPost cut")
    await read.close()


async def test_a_burst_of_lines_is_news_worth_a_save(monkeypatch):
    monkeypatch.setattr(log_stream, "SAVE_EVERY_BYTES", 10)
    news = asyncio.Event()
    read = stream(Chunks([b"0123456789\n"]), Found(), news)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert news.is_set()
    await read.close()


async def test_a_broken_connection_ends_the_stream_quietly():
    read = stream(Chunks([b"a\n"], aiohttp.ClientPayloadError("reset")), Found(), asyncio.Event())
    await read.until_end(5)
    assert read.ended and read.outcome(final=False) is None
    await read.close()


async def test_an_api_error_reading_is_raised_to_the_poll_and_others_wrapped():
    read = stream(Chunks([], KubeApiError(500, "gone")), Found(), asyncio.Event())
    await read.until_end(5)
    with pytest.raises(KubeApiError):
        read.outcome(final=True)
    other = stream(Chunks([], ValueError("bad bytes")), Found(), asyncio.Event())
    await other.until_end(5)
    with pytest.raises(RuntimeError, match="reading the log failed: bad bytes"):
        other.outcome(final=True)
    await read.close(), await other.close()
