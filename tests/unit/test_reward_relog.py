"""A triggerer killed and restarted rebuilds the trigger from the kwargs it had at deferral (no
progress in them): the resumed wait still finds the Post line, and logs no progress line twice,
thanks to the follower position it saves on the training Job."""

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
from tpu_rl.rewards.poll import POSITION_ANNOTATION
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
