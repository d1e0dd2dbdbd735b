"""triggerer_restart_reread_bytes: log bytes read again when the triggerer restarts mid-wait.

The reward trigger follows a training run; mid-training (after RESTART_AFTER reward lines) its
task is cancelled, as a triggerer that stops does, and a new trigger is built from the kwargs
it was serialized with at deferral (what a restarted triggerer has) and runs to the Post line.
Re-read bytes: what both fetched minus the log through the Post line. Every reward line
consumed is recorded, to check none is logged twice. Baseline: a follower with no saved
position reads everything again from the log's start (the bytes before the restart). Goal:
at most the log between two reward lines (the follower saves its position after each), and no
reward line logged twice.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections import Counter
from typing import Any
from unittest import mock

from airflow.sdk.module_loading import import_string

from sandbox.controller import Controller
from sandbox.harness import Sandbox
from tools.bench.log_reads import fetched, pod_name, produced
from tools.bench.metric import metric
from tools.bench.redefer import until_end
from tools.bench.workload import new_run, reward_trigger, scenario

TIME_SCALE = 0.003
POLL_S = 10.0
RESTART_AFTER = 3  # reward lines consumed (Pre and two intermediate evals) before the restart
SETTLE_S = 3.0
REWARD_LINE = re.compile(r"(Pre|Post) RL Training:|Intermediate Eval")


async def settled(box: Sandbox, layout: Any) -> None:
    """Until the emulator has recorded the cancelled trigger's open log stream (it records a
    request when it ends, and notices a client gone at its next write)."""
    count = fetched(box.emu, layout)[1]
    deadline = time.monotonic() + SETTLE_S
    while fetched(box.emu, layout)[1] == count and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


def save_interval(box: Sandbox, layout: Any) -> int:
    """The most log bytes between two reward lines: what a restart may read again at most,
    the position being saved after each reward line."""
    _, container_log = box.emu.read_log(layout.settings.namespace, pod_name(box.emu, layout), None)
    offsets, at = [0], 0
    for index, record in enumerate(container_log.records):
        at += len(container_log.render([index], timestamps=True))
        if REWARD_LINE.search(record.text):
            offsets.append(at)
    return max(b - a for a, b in itertools.pairwise(offsets))


async def restarted(box: Sandbox, layout: Any, consumed: list[tuple[str, str]]) -> dict[str, Any]:
    deferred: list[Any] = []  # the triggers the wait deferred on (after each progress report)
    task = asyncio.create_task(until_end(reward_trigger(box.emu, layout, POLL_S), deferred))
    while len(consumed) < RESTART_AFTER and not task.done():
        await asyncio.sleep(0.01)
    if task.done():
        raise RuntimeError(f"the wait ended before the restart: {task.result()}")
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    classpath, kwargs = deferred[-1].serialize()  # what the triggerer keeps from the deferral
    await settled(box, layout)
    restart_at = len(box.emu.requests), time.time()
    event = await until_end(import_string(classpath)(**kwargs))
    return {"event": event, "requests_before_restart": restart_at[0], "restart_at": restart_at[1]}


def measure(box: Sandbox, conf: dict[str, Any]) -> dict[str, Any]:
    from tpu_rl.watch import core

    layout = new_run(box, conf, backend=False)
    consumed: list[tuple[str, str]] = []
    on_line = core._on_reward_line

    def recording(state: Any, line: core.LogLine, effects: list[Any]) -> Any:
        result = on_line(state, line, effects)
        if state.reward_lines > len(consumed):  # a reward line: the watch's step read it
            consumed.append((line.stamp, line.text))
        return result

    before = len(box.emu.requests)
    with (
        Controller(box.emu, scenario(box, conf), time_scale=TIME_SCALE),
        mock.patch.object(core, "_on_reward_line", recording),
    ):
        run = asyncio.run(restarted(box, layout, consumed))
    if run["event"].get("status") != "success":
        raise RuntimeError(f"the restarted trigger did not find the Post line: {run['event']}")
    total, requests = fetched(box.emu, layout, before)
    first_part = total - fetched(box.emu, layout, run["requests_before_restart"])[0]
    needed = produced(box.emu, layout, through_post=True)
    twice = [line for line, n in Counter(consumed).items() if n > 1]
    entry = metric(
        max(0, total - needed),
        first_part,
        unit="bytes",
        goal=save_interval(box, layout),
        baseline_is="a follower without a saved position: everything before the restart again",
        details={
            "bytes_fetched_before_restart": first_part,
            "bytes_fetched_in_all": total,
            "log_bytes_through_post": needed,
            "log_requests": requests,
            "reward_lines_consumed": len(consumed),
            "reward_lines_logged_twice": len(twice),
            "restart_after_reward_lines": RESTART_AFTER,
        },
    )
    entry["goal"] += " (the most log between two reward lines) and no line logged twice"
    entry["goal_met"] = entry["goal_met"] and not twice
    return entry
