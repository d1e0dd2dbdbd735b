"""The reward wait against the sandbox's Kubernetes API emulator: the training Job, its pods and
the backend as the tests make them, MaxText's reward lines, the trigger's and the follower's
keyword arguments, and waits on a trigger's events (the fixtures `emu`, `creds`, `steps`,
`make_follower` and `gke_emu` are tests/conftest.py's)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import time
from typing import Any

import pytest

from sandbox.kube_emulator import KubeEmulator
from tpu_rl.rewards.poll import LogFollower
from tpu_rl.rewards.position import POSITION_ANNOTATION
from tpu_rl.rewards.trigger import RewardTrigger
from tpu_rl.watch.progress import PROGRESS_EVENT

NS = "default"
JOB = "job-gemma4-grpo-x7k2p"
C = "workload-container"
JOBSET = "gemma4-pw"
POLL = 0.05


# a pod of a preempted node, as GKE ends it
SHUTDOWN = "Pod was terminated in response to imminent node shutdown."
DISRUPTED = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "TerminationByKubelet",
    "message": SHUTDOWN,
}
SCHEDULED_FALSE = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "Unschedulable",
    "message": "0/4 nodes are available: 4 Insufficient google.com/tpu.",
}


def absl(message: str) -> str:
    return f"W1129 10:00:00.123456 140213 train_rl.py:824] {message}\n"


def metrics(corr: int, reward: float) -> str:
    pct = corr / 64 * 100
    return (
        f"corr={corr}, total=64, accuracy={pct}%, partial_accuracy={pct}%, "
        f"format_accuracy=85.9375%, mean_reward={reward:.4f}"
    )


def pre(corr: int = 7, reward: float = -0.2031) -> str:
    return absl(f"Pre RL Training: {metrics(corr, reward)}")


def step(n: int, reward: float = 0.05) -> str:
    return absl(f"Intermediate Eval (step={n}): {metrics(n // 5, reward)}")


def post(corr: int = 12, reward: float = 0.1234) -> str:
    return absl(f"Post RL Training: {metrics(corr, reward)}")


class Credentials:
    """Google credentials stand-in: each get_token() hands out the next queued token."""

    def __init__(self, token: str) -> None:
        self.queue = [token]
        self.calls = 0

    def next(self) -> str:
        self.calls += 1
        return self.queue.pop(0) if len(self.queue) > 1 else self.queue[0]


class Token:
    def __init__(self, value: str) -> None:
        self.value = value

    async def get(self) -> str:
        return self.value


class Clock:
    """Log timestamps a little apart, from now on."""

    def __init__(self, gap: float = 0.01) -> None:
        self.at = dt.datetime.now(dt.UTC)
        self.gap = dt.timedelta(seconds=gap)

    def __call__(self) -> dt.datetime:
        self.at += self.gap
        return self.at


def make_job(emu: KubeEmulator, *, backoff_limit: int = 0, suspend: bool = False) -> None:
    emu.create(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": JOB, "namespace": NS},
            "spec": {
                "backoffLimit": backoff_limit,
                "suspend": suspend,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": C, "image": "maxtext"}],
                    }
                },
            },
        }
    )


def make_pod(
    emu: KubeEmulator,
    name: str,
    *,
    labels: dict[str, str] | None = None,
    phase: str = "Running",
    containers: tuple[str, ...] = (C,),
    conditions: list[dict[str, Any]] | None = None,
) -> None:
    emu.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": labels or {"job-name": JOB}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": c, "image": "maxtext"} for c in containers],
            },
        }
    )
    if phase != "Pending" or conditions:
        emu.set_pod_phase(NS, name, phase, conditions=conditions)


def make_jobset(emu: KubeEmulator, *, suspend: bool = False) -> None:
    emu.create(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": JOBSET, "namespace": NS},
            "spec": {
                "suspend": suspend,
                "replicatedJobs": [
                    {
                        "name": "pathways-head",
                        "replicas": 1,
                        "template": {"spec": {"template": {"spec": {"containers": []}}}},
                    }
                ],
            },
        }
    )


def make_event(emu: KubeEmulator, name: str, involved: str, reason: str, message: str) -> None:
    emu.create(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": NS},
            "involvedObject": {"kind": "Job", "name": involved, "namespace": NS},
            "reason": reason,
            "message": message,
            "type": "Warning",
            "lastTimestamp": "2026-01-01T10:00:00Z",
        }
    )


def trigger_kwargs(emu: KubeEmulator, **overrides: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "cluster_url": emu.url,
        "ssl_ca_cert": emu.ca_b64,
        "namespace": NS,
        "job_name": JOB,
        "deadline": time.time() + 20,
        "poll_interval": POLL,
        "pending_timeout": 10.0,
    }
    kwargs.update(overrides)
    return kwargs


def follower(emu: KubeEmulator, **overrides: Any) -> LogFollower:
    kwargs = trigger_kwargs(emu, **overrides)
    kwargs.pop("poll_interval")
    return LogFollower(log=logging.getLogger("test.follower"), **kwargs)


class SettledFollower(LogFollower):
    """A streaming follower whose poll also gives the stream time to read what was logged.

    The stream is read in the background as lines arrive; a poll reports what it found."""

    async def poll(self) -> dict[str, Any] | None:
        if (event := await super().poll()) is not None:
            return event
        await asyncio.sleep(0.3)
        return await super().poll()


async def first_event(trigger: RewardTrigger, timeout: float = 10) -> dict[str, Any]:
    async def _first() -> dict[str, Any]:
        async for event in trigger.run():
            return event.payload
        raise AssertionError("the trigger ended without an event")

    return await asyncio.wait_for(_first(), timeout)


async def end_event(kwargs: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The wait's end and the progress reports before it: each report's state rebuilds the
    trigger, as the task does when it defers again (WaitForRewardsSensor.report_progress)."""
    reports = []
    while (event := await first_event(RewardTrigger(**kwargs))).get("status"):
        if event.get("reason") != PROGRESS_EVENT:
            return event, reports
        reports.append(event)
        kwargs = {**kwargs, "state": event["state"]}
    raise AssertionError(f"an event without a status: {event}")


async def wait_for(condition: Any, timeout: float = 5) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "condition not met in time"
        await asyncio.sleep(0.02)


async def poll_until(f: LogFollower, condition: Any, timeout: float = 5) -> None:
    """Poll (each poll None) until the condition holds."""
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "condition not met in time"
        assert await f.poll() is None
        await asyncio.sleep(0.05)


def read_steps(f: LogFollower) -> list[int]:
    """The Intermediate Eval steps the follower has read (logged after the poll that saves
    the position past them, when it streams)."""
    return [line["step"] for line in f.state.intermediate]


def log_requests(emu: KubeEmulator) -> list[Any]:
    return [r for r in emu.requests if r.path.endswith("/log")]


SLOW_POLL = 30.0  # the production default: the timer poll must not be what ends a wait


async def started(trigger: Any) -> asyncio.Task:
    """The trigger's first event as a task, once its first poll is over (stream open)."""
    task = asyncio.create_task(first_event(trigger, timeout=20))
    await asyncio.sleep(0.8)
    assert not task.done(), task.result()
    return task


def saved_position(emu: KubeEmulator) -> dict:
    """The position the wait saved on the training Job (tpu_rl.rewards.position)."""
    annotations = emu.get("jobs", NS, JOB)["metadata"].get("annotations") or {}
    return json.loads(annotations.get(POSITION_ANNOTATION) or "{}")


def killed_without_a_word(monkeypatch: pytest.MonkeyPatch) -> None:
    """A triggerer SIGKILLed (or whose stopping save never reached the API): no handler of the
    trigger saves anything; the log stream dies with the process."""

    async def stop_without_saving(self: LogFollower) -> None:
        await self.reader.close()

    monkeypatch.setattr(LogFollower, "stop", stop_without_saving)
