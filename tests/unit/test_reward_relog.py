"""A triggerer killed and restarted rebuilds the trigger from the kwargs it had at deferral (no
progress in them): the resumed wait still finds the Post line, and logs no progress line twice,
thanks to the follower position it saves on the training Job (after each line it logs, and
when the triggerer stops it)."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.unit.test_reward_trigger import (  # noqa: F401 (fixtures emu, creds, steps)
    JOB,
    NS,
    C,
    Clock,
    creds,
    emu,
    first_event,
    make_job,
    make_pod,
    post,
    pre,
    step,
    steps,
    trigger_kwargs,
    wait_for,
)
from tpu_rl.rewards import follower
from tpu_rl.rewards.position import POSITION_ANNOTATION
from tpu_rl.rewards.trigger import RewardTrigger

pytestmark = pytest.mark.asyncio


async def test_a_trigger_rebuilt_from_its_deferral_kwargs_logs_no_line_twice(emu, creds, steps):  # noqa: F811
    make_job(emu)
    make_pod(emu, "train-a")
    clock = Clock()
    deferred_with = trigger_kwargs(emu)  # what Airflow stored when the task deferred
    first = RewardTrigger(**deferred_with)
    task = asyncio.create_task(first_event(first))
    emu.append_log(NS, "train-a", C, pre(), at=clock())
    emu.append_log(NS, "train-a", C, step(10), at=clock())
    twin = clock()  # two lines with one timestamp: the saved position counts them
    emu.append_log(NS, "train-a", C, step(20) + step(30), at=twin)
    await wait_for(lambda: steps() == [10, 20, 30])

    def saved_position() -> dict:
        annotations = emu.get("jobs", NS, JOB)["metadata"].get("annotations") or {}
        return json.loads(annotations.get(POSITION_ANNOTATION) or "{}")

    await wait_for(lambda: saved_position().get("seen_at_last_time") == 2)
    assert saved_position()["pre"]["corr"] == 7
    task.cancel()  # SIGKILL: the progress in `first` is lost with the process
    with pytest.raises(asyncio.CancelledError):
        await task

    emu.append_log(NS, "train-a", C, step(40), at=clock())
    emu.append_log(NS, "train-a", C, post(), at=clock())
    event = await first_event(RewardTrigger(**deferred_with))
    assert event["status"] == "success" and event["pre"]["corr"] == 7
    assert steps() == [10, 20, 30, 40]


async def test_a_triggerer_stopped_right_after_a_burst_logs_each_line_once(
    emu,  # noqa: F811
    creds,  # noqa: F811
    steps,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
):
    """The triggerer stops (it cancels its triggers) the moment the last line of a burst is
    logged, before any poll could save the position: the new trigger logs none again."""
    make_job(emu)
    make_pod(emu, "train-a")
    clock = Clock()
    deferred_with = trigger_kwargs(emu, poll_interval=30.0)
    emu.append_log(NS, "train-a", C, pre(), at=clock())
    first = asyncio.create_task(first_event(RewardTrigger(**deferred_with), timeout=20))
    await wait_for(lambda: '"reward_lines": 1' in json.dumps(saved_position(emu)))
    burst = list(range(10, 210, 10))
    read_line = follower._on_line

    def stop_after_the_burst(state, stamp, text, log):
        result = read_line(state, stamp, text, log)
        if f"step={burst[-1]})" in text:
            first.cancel()  # no poll runs between the line's logging and the stop
        return result

    monkeypatch.setattr(follower, "_on_line", stop_after_the_burst)
    emu.append_log(NS, "train-a", C, "".join(step(n) for n in burst), at=clock())
    with pytest.raises(asyncio.CancelledError):
        await first
    assert steps() == burst
    monkeypatch.setattr(follower, "_on_line", read_line)

    emu.append_log(NS, "train-a", C, step(210) + post(), at=clock())
    event = await first_event(RewardTrigger(**deferred_with))
    assert event["status"] == "success" and event["pre"]["corr"] == 7
    assert steps() == [*burst, 210]


def saved_position(emu) -> dict:  # noqa: F811
    annotations = emu.get("jobs", NS, JOB)["metadata"].get("annotations") or {}
    return json.loads(annotations.get(POSITION_ANNOTATION) or "{}")
