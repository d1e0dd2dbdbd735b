"""While its watches are up, the reward trigger's timer polls ask the API nothing: the Job,
its pods and the backend are read again only when a watch reports a change (a triggerer
runs many waits; the provider's trigger costs one GET a poll)."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.support.kube_wait import (
    JOB,
    JOBSET,
    NS,
    C,
    first_event,
    make_job,
    make_jobset,
    make_pod,
    pre,
    trigger_kwargs,
)
from tpu_rl.kube import objects as kube
from tpu_rl.rewards.trigger import RewardTrigger

pytestmark = pytest.mark.asyncio


def asked(emu, since: int) -> list[str]:
    """The requests answered since `since` other than watches and the followed log."""
    return [
        f"{r.method} {r.path}"
        for r in list(emu.requests)[since:]
        if r.query.get("watch") != "true" and not r.path.endswith("/log")
    ]


async def steadily(condition, for_s: float = 0.3, timeout: float = 10.0) -> None:
    """Until `condition` has held for `for_s` in a row."""
    deadline, since = time.monotonic() + timeout, None
    while since is None or time.monotonic() - since < for_s:
        assert time.monotonic() < deadline, "the condition never held steadily"
        since = (since or time.monotonic()) if condition() else None
        await asyncio.sleep(0.02)


async def test_timer_polls_ask_nothing_until_a_watch_reports_a_change(emu, creds):
    make_job(emu)
    make_pod(emu, "train-a")
    make_jobset(emu)
    make_pod(emu, "pw-head", labels={kube.JOBSET_NAME_LABEL: JOBSET})
    emu.append_log(NS, "train-a", C, pre())
    kwargs = trigger_kwargs(emu, poll_interval=0.05, backend_jobset_name=JOBSET)
    trigger = RewardTrigger(**kwargs)
    task = asyncio.create_task(first_event(trigger, timeout=20))
    # the first polls read the Pre line; the watches are up and a poll has read their first
    # events (what each vouches for is read and unchanged), for some 6 timer polls in a row
    vouched = trigger.follower.cluster.watched.all()
    await steadily(
        lambda: (
            trigger.follower.state.pre is not None
            and all(f.live and not f.changed for f in vouched)
        )
    )
    quiet_from = len(emu.requests)
    await asyncio.sleep(0.5)  # some 10 timer polls: the silence the test is about
    assert not task.done() and asked(emu, quiet_from) == []
    changed_from = len(emu.requests)
    emu.set_job_condition(NS, JOB, "Failed", reason="BackoffLimitExceeded")
    event = await task
    assert event["reason"] == "job_failed"
    assert f"GET {kube.job_path(NS, JOB)}" in asked(emu, changed_from)
