"""While its watches are up, the reward trigger's timer polls ask the API nothing: the Job,
its pods and the backend are read again only when a watch reports a change (a triggerer
runs many waits; the provider's trigger costs one GET a poll)."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.test_reward_trigger import (  # noqa: F401 (fixtures emu, creds)
    JOB,
    JOBSET,
    NS,
    C,
    creds,
    emu,
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


def asked(emu, since: int) -> list[str]:  # noqa: F811
    """The requests answered since `since` other than watches and the followed log."""
    return [
        f"{r.method} {r.path}"
        for r in list(emu.requests)[since:]
        if r.query.get("watch") != "true" and not r.path.endswith("/log")
    ]


async def test_timer_polls_ask_nothing_until_a_watch_reports_a_change(emu, creds):  # noqa: F811
    make_job(emu)
    make_pod(emu, "train-a")
    make_jobset(emu)
    make_pod(emu, "pw-head", labels={kube.JOBSET_NAME_LABEL: JOBSET})
    emu.append_log(NS, "train-a", C, pre())
    kwargs = trigger_kwargs(emu, poll_interval=0.05, backend_jobset_name=JOBSET)
    task = asyncio.create_task(first_event(RewardTrigger(**kwargs), timeout=20))
    await asyncio.sleep(1.5)  # the first polls, the watches up and their first events read
    quiet_from = len(emu.requests)
    await asyncio.sleep(1.0)  # some 20 timer polls
    assert asked(emu, quiet_from) == []
    changed_from = len(emu.requests)
    emu.set_job_condition(NS, JOB, "Failed", reason="BackoffLimitExceeded")
    event = await task
    assert event["reason"] == "job_failed"
    assert f"GET {kube.job_path(NS, JOB)}" in asked(emu, changed_from)
