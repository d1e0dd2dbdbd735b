"""The follower's reads of the TensorBoard event files (tpu_rl.rewards.poll.LogFollower.
_read_event_files): their cadence, the attempt's own files, the saved offsets, the watchdog's
event; the reader itself is tests/integration/test_event_files.py's. And where the log stream
stops when the wait hands its state on (LogFollower.settle)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from datetime import UTC, datetime
from unittest.mock import AsyncMock

from sandbox.kube_logs import rfc3339nano
from tests.support import kube_wait
from tests.support.board import JOB, NAME, Files, follower, kl
from tpu_rl.rewards.event_files import Scalar
from tpu_rl.rewards.poll import BOARD_READ, LogFollower
from tpu_rl.watch import health
from tpu_rl.watch.ends import WaitEnd
from tpu_rl.watch.progress import PROGRESS_EVENT
from tpu_rl.watch.state import FollowState


def reward(step: int, value: float) -> Scalar:
    return Scalar(health.SCORE_MEAN, step, value, NAME)


async def test_a_kl_blow_up_in_the_new_scalars_ends_the_wait_with_the_watchdog_s_event():
    before = [reward(n - 1, 0.5) for n in range(1, 11)] + [kl(n, 0.01) for n in range(1, 11)]
    files = Files(before, [reward(10, 0.1), kl(11, 0.5)])
    f = follower(files)
    assert await f._read_event_files(JOB) is None
    event = await f._read_event_files(JOB)
    assert event is not None and event["reason"] == WaitEnd.TRAINING_UNHEALTHY
    assert event["anomaly"]["rule"] == health.KL_BLOWUP
    assert f"{NAME}: actor/train/kl=0.5 at step 11" in event["message"]
    assert f.state.event_offsets == {NAME: 200}  # saved with the position
    # the offsets of the last read, and the Job's creation: an earlier attempt's files are older
    created = datetime(2025, 11, 29, 10, tzinfo=UTC).timestamp()
    assert files.asked[1] == ({NAME: 100}, created, BOARD_READ)


async def test_reads_come_at_most_every_interval_and_a_failed_read_is_a_warning(caplog):
    files = Files(RuntimeError("403 Forbidden"), [kl(1, 0.01)])
    f = follower(files, every=3600.0)
    assert await f._read_event_files(JOB) is None
    assert "TensorBoard event files not read: 403 Forbidden" in caplog.text
    assert await f._read_event_files(JOB) is None  # within the interval: no read
    assert len(files.asked) == 1
    assert f.state.event_offsets == {}


async def test_no_directory_no_read():
    f = LogFollower(
        cluster_url="https://127.0.0.1:1",
        ssl_ca_cert="",
        namespace="ns",
        job_name="job",
        deadline=time.time() + 60,
    )
    assert f.event_files is None
    assert await f._read_event_files(JOB) is None


def flat(step: int, value: float = 0.0) -> list[Scalar]:
    """A batch whose completions all scored `value` (TensorBoard's score max equal to its min)."""
    return [Scalar(tag, step, value, NAME) for tag in (health.SCORE_MAX, health.SCORE_MIN)]


async def test_a_progress_report_leaves_the_event_files_unread_for_the_watchdog(monkeypatch):
    """A progress report (every 10% of the steps) whose poll read the event files once more, for
    the page's curves only, would move the offsets past scalars the watchdog never judged: the
    e2e reward-spread collapse would be seen from step 45 instead of 41.
    A report reads nothing; the wait's own end still reads the last scalars for the curves."""
    files = Files([*flat(41), *flat(42)], [kl(50, 0.01)])
    f = follower(files)
    f.state.health = health.armed(None, health.Rules.defaults(reward_spread_steps=2))
    f.state.event_offsets = {NAME: 100}  # this attempt's file, read up to step 40
    report = {"status": "running", "reason": PROGRESS_EVENT}
    monkeypatch.setattr(f, "_poll_once", AsyncMock(return_value=report))
    assert (await f.poll())["reason"] == PROGRESS_EVENT
    # the next poll's read judges the batches after the report: flat from step 41
    event = await f._read_event_files(JOB)
    assert event is not None and event["anomaly"]["rule"] == health.STD_COLLAPSE, event
    assert (event["anomaly"]["anomaly_step"], event["anomaly"]["step"]) == (41, 42)
    assert files.asked == [({NAME: 100}, 1764410400, BOARD_READ)]  # that read only
    monkeypatch.setattr(f, "_poll_once", AsyncMock(return_value={"status": "success"}))
    await f.poll()
    assert len(files.asked) == 2 and f.state.curves["last"][health.KL_TAG] == [50, 0.01]


async def test_a_stream_handed_on_stops_at_a_second_s_start_so_the_next_reads_little_again(
    emu, creds
):
    """`sinceTime` has whole seconds: the wait rebuilt from a progress report's state is sent
    again every line of the last line's second it read. Settling reads on to the chunk that
    begins a new second and reads no more: one line is sent again, not four."""
    kube_wait.make_job(emu)
    kube_wait.make_pod(emu, "train-a")
    second = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(minutes=5)

    def log(text: str, at_s: float) -> int:
        """Log `text` at `at_s` seconds past `second`; the bytes a read sends of it."""
        at = second + dt.timedelta(seconds=at_s)
        emu.append_log(kube_wait.NS, "train-a", kube_wait.C, text, at=at)
        return len(rfc3339nano(at)) + 1 + len(text)

    def read_to(fraction: str) -> bool:
        return (first.state.last_time or "").endswith(fraction)

    first = kube_wait.follower(emu, stream_log=True)
    try:
        assert await first.poll() is None  # opens the stream
        for n in (1, 2, 3):  # three chunks of one second
            log(kube_wait.step(n), n / 10)
            await kube_wait.wait_for(lambda n=n: read_to(f".{n}Z"))
        await first.reader.settle(0.2)  # no new second in time: it returns all the same
        assert read_to(".3Z")
        settling = asyncio.create_task(first.settle())
        resent = log(kube_wait.step(4), 1.1)
        await asyncio.wait_for(settling, 1)
        unread = log(kube_wait.step(5), 1.2)
        await asyncio.sleep(0.3)
        assert read_to(".1Z") and first.found() is None  # step 5's chunk was not read
    finally:
        await first.close()

    handed_on = FollowState.from_dict(json.loads(json.dumps(first.state.as_dict())))
    unread += log(kube_wait.post(), 1.3)
    rebuilt = kube_wait.follower(emu, stream_log=True, state=handed_on)
    try:
        async with asyncio.timeout(5):
            while (event := await rebuilt.poll()) is None:
                await asyncio.sleep(0.05)
    finally:
        await rebuilt.close()
    assert event["status"] == "success"
    assert [line["step"] for line in rebuilt.state.intermediate] == [1, 2, 3, 4, 5]
    await kube_wait.wait_for(lambda: len(kube_wait.log_requests(emu)) == 2)
    assert kube_wait.log_requests(emu)[1].response_bytes == resent + unread
