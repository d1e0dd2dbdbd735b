"""The reward wait's saved position is current after a burst of log lines:
a triggerer killed right after the burst has its successor read again at most one save's worth
of the log, not the whole burst."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tests.support.kube_wait import (
    NS,
    C,
    Clock,
    absl,
    first_event,
    killed_without_a_word,
    make_job,
    make_pod,
    post,
    pre,
    saved_position,
    trigger_kwargs,
    wait_for,
)
from tpu_rl.rewards.log_stream import SAVE_EVERY_BYTES
from tpu_rl.rewards.trigger import RewardTrigger

pytestmark = pytest.mark.asyncio
STEPS = 2000  # step lines logged at once: no reward line, no save among them
PER_SECOND = 50  # of them logged in each second


async def test_a_triggerer_killed_right_after_a_burst_reads_little_of_it_again(
    emu,
    creds,
    monkeypatch: pytest.MonkeyPatch,
):
    make_job(emu)
    make_pod(emu, "train-a")
    clock = Clock(gap=1.0)
    # no poll on the timer meanwhile; a deadline no loaded CI machine reaches (the default 20 s
    # ended the first trigger with a timeout event before the cancel below)
    deferred_with = trigger_kwargs(emu, poll_interval=30.0, deadline=time.time() + 300)
    emu.append_log(NS, "train-a", C, pre(), at=clock())
    first = RewardTrigger(**deferred_with)
    task = asyncio.create_task(first_event(first, timeout=20))
    await wait_for(lambda: '"reward_lines": 1' in json.dumps(saved_position(emu)))
    killed_without_a_word(monkeypatch)
    lines = [absl(f"Train step {n} training loss: 0.01") for n in range(1, STEPS + 1)]
    assert len("".join(lines)) > 5 * SAVE_EVERY_BYTES
    for second in range(0, STEPS, PER_SECOND):  # sinceTime resends a second: a few of them
        emu.append_log(NS, "train-a", C, "".join(lines[second : second + PER_SECOND]), at=clock())
    await wait_for(lambda: first.follower.state.reached_step == STEPS)
    # a poll on news comes within MIN_POLL_GAP_S and saves the position past the burst: at most
    # a second (without that poll, the successor below reads the whole burst again)
    end = time.monotonic() + 1.0
    while saved_position(emu).get("reached_step") != STEPS and time.monotonic() < end:
        await asyncio.sleep(0.02)
    assert not task.done(), task.result()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    emu.append_log(NS, "train-a", C, post(), at=clock())
    rebuilt = RewardTrigger(**deferred_with)
    event = await first_event(rebuilt)
    assert event["status"] == "success" and event["pre"]["corr"] == 7
    assert rebuilt.follower.reader.bytes_read < SAVE_EVERY_BYTES
