"""The follower's reads of the TensorBoard event files (tpu_rl.rewards.poll.LogFollower.
_read_event_files): their cadence, the attempt's own files, the saved offsets, the watchdog's
event; the reader itself is tests/integration/test_event_files.py's."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from tpu_rl.rewards.event_files import Scalar
from tpu_rl.rewards.poll import BOARD_READ, LogFollower
from tpu_rl.watch import health
from tpu_rl.watch.ends import WaitEnd

NAME = "events.out.tfevents.1764410400.rl-train-0-0"
JOB = {"metadata": {"name": "job", "creationTimestamp": "2025-11-29T10:00:00Z"}}


class Files:
    """EventFiles as the follower calls it: what each read returns, and what it was asked."""

    def __init__(self, *reads: list[Scalar] | Exception) -> None:
        self.reads, self.asked = list(reads), []

    def read(self, offsets, since, tags):
        self.asked.append((dict(offsets), since, tuple(tags)))
        answer = self.reads.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return {**offsets, NAME: 100 * len(self.asked)}, answer

    def close(self) -> None:
        pass


def follower(files: Files, every: float = 0.0) -> LogFollower:
    built = LogFollower(
        cluster_url="https://127.0.0.1:1",
        ssl_ca_cert="",
        namespace="ns",
        job_name="job",
        deadline=time.time() + 60,
        tensorboard_dir="gs://bucket/run/tensorboard/",
        tensorboard_every_s=every,
        log=logging.getLogger("test.poll"),
    )
    built.event_files = files  # type: ignore[assignment]
    return built


def kl(step: int, value: float) -> Scalar:
    return Scalar(health.KL_TAG, step, value, NAME)


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
