"""A triggerer killed and restarted rebuilds the trigger from the kwargs it had at deferral (no
progress in them): the resumed wait still finds the Post line, and logs no progress line twice,
thanks to the follower position it saves on the training Job (after each line it logs, and
when the triggerer stops it)."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.support.kube_wait import (
    JOB,
    NS,
    C,
    Clock,
    first_event,
    killed_without_a_word,
    make_job,
    make_pod,
    post,
    pre,
    saved_position,
    step,
    trigger_kwargs,
    wait_for,
)
from tpu_rl.rewards import line_reader
from tpu_rl.rewards.position import POSITION_ANNOTATION
from tpu_rl.rewards.trigger import RewardTrigger
from tpu_rl.watch import core

pytestmark = pytest.mark.asyncio


async def test_a_trigger_rebuilt_from_its_deferral_kwargs_logs_no_line_twice(emu, creds, steps):
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
    emu,
    creds,
    steps,
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
    read_line = core._on_reward_line

    def stop_after_the_burst(state, line, effects):
        result = read_line(state, line, effects)
        if f"step={burst[-1]})" in line.text:
            first.cancel()  # no poll runs between the line's logging and the stop
        return result

    monkeypatch.setattr(core, "_on_reward_line", stop_after_the_burst)
    emu.append_log(NS, "train-a", C, "".join(step(n) for n in burst), at=clock())
    with pytest.raises(asyncio.CancelledError):
        await first
    assert steps() == burst
    monkeypatch.setattr(core, "_on_reward_line", read_line)

    emu.append_log(NS, "train-a", C, step(210) + post(), at=clock())
    event = await first_event(RewardTrigger(**deferred_with))
    assert event["status"] == "success" and event["pre"]["corr"] == 7
    assert steps() == [*burst, 210]


async def test_a_triggerer_killed_right_after_a_burst_logs_each_line_once(
    emu,
    creds,
    steps,
    monkeypatch: pytest.MonkeyPatch,
):
    """The burst is read between two polls and the process dies before the next poll's save:
    the lines read but not saved are not logged either, so the rebuilt trigger, which reads
    them again, logs each of them once."""
    make_job(emu)
    make_pod(emu, "train-a")
    clock = Clock()
    deferred_with = trigger_kwargs(emu, poll_interval=30.0)
    emu.append_log(NS, "train-a", C, pre(), at=clock())
    first = asyncio.create_task(first_event(RewardTrigger(**deferred_with), timeout=20))
    await wait_for(lambda: '"reward_lines": 1' in json.dumps(saved_position(emu)))
    killed_without_a_word(monkeypatch)
    burst = list(range(10, 210, 10))
    read_line = core._on_reward_line

    def kill_after_the_burst(state, line, effects):
        result = read_line(state, line, effects)
        if f"step={burst[-1]})" in line.text:
            first.cancel()  # no poll runs between the burst and the kill
        return result

    monkeypatch.setattr(core, "_on_reward_line", kill_after_the_burst)
    emu.append_log(NS, "train-a", C, "".join(step(n) for n in burst), at=clock())
    with pytest.raises(asyncio.CancelledError):
        await first
    monkeypatch.setattr(core, "_on_reward_line", read_line)

    emu.append_log(NS, "train-a", C, step(210) + post(), at=clock())
    event = await first_event(RewardTrigger(**deferred_with))
    assert event["status"] == "success" and event["pre"]["corr"] == 7
    assert steps() == [*burst, 210]


async def test_a_killed_triggerer_reads_again_at_most_the_lines_since_its_last_poll(
    emu,
    creds,
    monkeypatch: pytest.MonkeyPatch,
):
    """Hours of log lines with no reward line between them: each poll saves the
    position they moved, so a killed triggerer's successor does not read them all again."""
    make_job(emu)
    make_pod(emu, "train-a")
    clock = Clock(gap=1.0)  # each append in a second of its own
    deferred_with = trigger_kwargs(emu)  # polls every 0.05 s
    emu.append_log(NS, "train-a", C, pre(), at=clock())
    first = asyncio.create_task(first_event(RewardTrigger(**deferred_with), timeout=20))
    await wait_for(lambda: '"reward_lines": 1' in json.dumps(saved_position(emu)))
    killed_without_a_word(monkeypatch)
    line = "I1129 10:00:01.5 1 rl_cluster.py:573] batch {n} loaded\n"  # no step, no reward
    for chunk in range(0, 400, 100):
        text = "".join(line.format(n=n) for n in range(chunk, chunk + 100))
        emu.append_log(NS, "train-a", C, text, at=clock())
    emu.append_log(NS, "train-a", C, line.format(n=400), at=(last := clock()))

    def saved_second() -> int | None:
        stamp = saved_position(emu).get("last_time")
        return line_reader.time_key(stamp)[0] if stamp else None

    await wait_for(lambda: saved_second() == int(last.timestamp()))
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first

    emu.append_log(NS, "train-a", C, post(), at=clock())
    rebuilt = RewardTrigger(**deferred_with)
    event = await first_event(rebuilt)
    assert event["status"] == "success"
    # the last line (its second is sent again) and the Post line, not the 400 lines before
    assert rebuilt.follower.reader.bytes_read < 10 * len(line)


@pytest.mark.parametrize(
    "saved",
    [
        "not json",
        '["a list"]',
        '{"pod_uid": "u", "last_time": 5}',
        '{"pod_uid": "u", "last_time": "yesterday"}',
        '{"pod_uid": "u", "seen_at_last_time": "2"}',
        '{"pod_uid": "u", "step_marks": [[1]]}',
        '{"pod_uid": "u", "pending_since": NaN}',
    ],
)
async def test_an_unreadable_saved_position_is_skipped_with_a_warning(
    emu,
    creds,
    saved: str,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
):
    """A position read back from the Job that is not one a follower saved does not crash the
    wait: the log is read from its start, and the warning says why."""
    make_job(emu)
    emu.patch("jobs", NS, JOB, {"metadata": {"annotations": {POSITION_ANNOTATION: saved}}})
    make_pod(emu, "train-a")
    emu.append_log(NS, "train-a", C, pre() + step(10) + post(), at=Clock()())
    event = await first_event(RewardTrigger(**trigger_kwargs(emu)))
    assert event["status"] == "success" and event["pre"]["corr"] == 7
    logged = capsys.readouterr().out + caplog.text
    assert logged.count("Intermediate Eval step=10") == 1
    [warning] = [line for line in logged.splitlines() if "saved on the Job is unreadable" in line]
    assert "reading the log from its start" in warning
