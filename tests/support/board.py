"""The follower's reads of the training's TensorBoard event files without GCS: EventFiles as
LogFollower calls it (what each read returns, what it was asked), a follower of it, KL scalars."""

from __future__ import annotations

import logging
import time

from tpu_rl.rewards.event_files import Scalar
from tpu_rl.rewards.poll import LogFollower
from tpu_rl.watch import health

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
