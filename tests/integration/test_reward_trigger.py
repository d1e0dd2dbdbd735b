"""RewardTrigger and LogFollower over HTTPS against the sandbox's Kubernetes API emulator.

The only seam patched is Google credentials (GoogleBaseAsyncHook.get_token); the cluster URL
and CA go straight to the trigger. Everything after that is real HTTP to the emulator.
"""

import asyncio
import datetime as dt
import gc
import itertools
import json
import time
import warnings
from typing import Any

import pytest
from airflow.sdk.module_loading import import_string  # as the triggerer loads triggers

from sandbox.controller import Controller, Scenario
from sandbox.kube_emulator import KubeEmulator
from sandbox.kube_logs import rfc3339nano
from sandbox.workloads import (
    DEFAULT_POST,
    DEFAULT_PRE,
    crashing_worker_script,
    grpo_client_script,
    pathways_server_script,
)
from tests.support.kube_wait import (
    JOB,
    JOBSET,
    NS,
    SCHEDULED_FALSE,
    SLOW_POLL,
    C,
    Clock,
    absl,
    end_event,
    first_event,
    follower,
    log_requests,
    make_event,
    make_job,
    make_jobset,
    make_pod,
    poll_until,
    post,
    pre,
    read_steps,
    started,
    step,
    trigger_kwargs,
    wait_for,
)
from tpu_rl.kube import objects as kube
from tpu_rl.kube import verdicts
from tpu_rl.kube.async_client import AsyncKube, KubeApiError
from tpu_rl.kube.pods_trigger import PodsReadyTrigger
from tpu_rl.rewards.position import POSITION_ANNOTATION
from tpu_rl.rewards.trigger import RewardTrigger
from tpu_rl.watch import health
from tpu_rl.watch.ends import WaitEnd
from tpu_rl.watch.progress import PROGRESS_EVENT
from tpu_rl.watch.state import FollowState

pytestmark = pytest.mark.asyncio


# -- reading the log ------------------------------------------------------------------------


async def test_log_growing_over_polls(emu, creds, steps):
    make_job(emu)
    make_pod(emu, "train-a")
    f = follower(emu)
    emu.append_log(NS, "train-a", C, "I1129 09:41:02.118342 140213 max_utils.py:512] start\n")
    assert await f.poll() is None
    emu.append_log(NS, "train-a", C, pre() + "Processed prompts: 100%|####| 64/64\n")
    assert await f.poll() is None
    assert f.state.pre is not None and f.state.pre["mean_reward"] == -0.2031
    for n in (10, 20, 30):
        emu.append_log(NS, "train-a", C, step(n))
        assert await f.poll() is None
    emu.append_log(NS, "train-a", C, absl("RL Training Completed Successfully!") + post())
    event = await f.poll()
    assert event is not None and event["status"] == "success"
    assert event["pre"]["corr"] == 7
    assert event["post"] == {
        "corr": 12,
        "total": 64,
        "accuracy": 18.75,
        "partial_accuracy": 18.75,
        "format_accuracy": 85.9375,
        "mean_reward": 0.1234,
    }
    assert event["post_time"].endswith("Z")
    assert steps() == [10, 20, 30]
    queries = [r.query for r in log_requests(emu)]
    assert "sinceTime" not in queries[0] and all("sinceTime" in q for q in queries[1:])
    assert all(q["timestamps"] == "true" and q["container"] == C for q in queries)


async def test_split_line_is_read_once_whole(emu, creds, make_follower, steps):
    make_job(emu)
    make_pod(emu, "train-a")
    f = make_follower()
    line = step(10)
    emu.append_log(NS, "train-a", C, line[:40])
    assert await f.poll() is None
    emu.append_log(NS, "train-a", C, line[40:] + post()[:55])
    assert await f.poll() is None
    assert steps() == [10]
    emu.append_log(NS, "train-a", C, post()[55:])
    event = await f.poll()
    assert event is not None and event["post"]["mean_reward"] == 0.1234
    assert steps() == [10]


async def test_same_timestamp_lines_are_told_apart(emu, creds, make_follower, steps):
    """Identical lines at one timestamp count twice; re-reads of that second count once."""
    make_job(emu)
    make_pod(emu, "train-a")
    f = make_follower()
    at = dt.datetime.now(dt.UTC)
    emu.append_log(NS, "train-a", C, step(10), at=at)
    assert await f.poll() is None
    emu.append_log(NS, "train-a", C, step(10), at=at)
    emu.append_log(NS, "train-a", C, step(20), at=at)
    assert await f.poll() is None
    assert await f.poll() is None
    assert steps() == [10, 10, 20]


async def test_container_restart_reads_old_tail_then_new_log(emu, creds, make_follower, steps):
    make_job(emu)
    make_pod(emu, "train-a")
    f = make_follower()
    emu.append_log(NS, "train-a", C, pre() + step(10))
    assert await f.poll() is None
    emu.append_log(NS, "train-a", C, step(20))  # written just before the crash, not read yet
    emu.restart_container(NS, "train-a", C)
    emu.append_log(NS, "train-a", C, pre(corr=8) + step(10, reward=0.5))
    assert await f.poll() is None
    assert steps() == [10, 20, 10]
    assert f.state.restart_count == 1 and f.state.pre["corr"] == 8
    emu.append_log(NS, "train-a", C, post())
    event = await f.poll()
    assert event is not None and event["status"] == "success" and event["pre"]["corr"] == 8
    assert steps() == [10, 20, 10]
    assert any(r.query.get("previous") == "true" for r in log_requests(emu))


async def test_replaced_pod_is_read_from_its_start(emu, creds, make_follower, steps):
    make_job(emu, backoff_limit=2)
    make_pod(emu, "train-a")
    f = make_follower()
    emu.append_log(NS, "train-a", C, pre() + step(10))
    assert await f.poll() is None
    emu.set_pod_phase(NS, "train-a", "Failed", exit_code=1)
    assert await f.poll() is None  # the Job may still retry: no failure yet
    make_pod(emu, "train-b")
    emu.append_log(NS, "train-b", C, pre(corr=6) + step(10, reward=0.2) + step(20))
    assert await f.poll() is None
    assert f.state.pod_name == "train-b"
    emu.delete("pods", NS, "train-b")  # evicted: the Job makes another one
    make_pod(emu, "train-c")
    emu.append_log(NS, "train-c", C, pre(corr=5) + post(corr=13))
    event = await f.poll()
    assert event is not None and event["status"] == "success"
    assert event["pre"]["corr"] == 5 and event["post"]["corr"] == 13
    assert steps() == [10, 10, 20]


async def test_named_container_among_several(emu, creds):
    make_job(emu)
    make_pod(emu, "head", containers=("pathways-proxy", C))
    emu.append_log(NS, "head", C, post())
    emu.append_log(NS, "head", "pathways-proxy", "proxy up\n")
    event = await follower(emu, container_name=C).poll()
    assert event is not None and event["status"] == "success"
    event = await follower(emu).poll()
    assert event is not None and event["reason"] == "api_error"
    assert "set container_name" in event["message"]


# -- failing fast ---------------------------------------------------------------------------


async def test_job_failed(emu, creds):
    make_job(emu)
    make_pod(emu, "train-a")
    emu.append_log(NS, "train-a", C, step(10) + "Traceback (most recent call last):\n")
    emu.set_job_condition(
        NS, JOB, "Failed", reason="BackoffLimitExceeded", message="Job has reached the limit"
    )
    event = await first_event(RewardTrigger(**trigger_kwargs(emu)))
    assert event["status"] == "error" and event["reason"] == "job_failed"
    assert "BackoffLimitExceeded" in event["message"]
    assert "Traceback (most recent call last)" in event["message"]


async def test_pod_failed_with_last_lines_and_no_secrets(emu, creds):
    make_job(emu, backoff_limit=0)
    make_pod(emu, "train-a")
    emu.append_log(
        NS,
        "train-a",
        C,
        "I1129 09:41:05 1 pyconfig.py:411] Config param hf_access_token: hf_FakeSecret1234567\n"
        + step(10)
        + "RESOURCE_EXHAUSTED: Attempting to reserve 12.5G at the bottom of memory\n",
    )
    f = follower(emu)
    assert await f.poll() is None
    emu.set_pod_phase(NS, "train-a", "Failed", exit_code=137, reason="OOMKilled")
    event = await f.poll()
    assert event is not None and event["reason"] == "pod_failed"
    assert "exited with code 137" in event["message"] and "OOMKilled" in event["message"]
    assert "RESOURCE_EXHAUSTED" in event["message"]
    assert "hf_FakeSecret1234567" not in event["message"]


async def test_the_token_without_its_prefix_and_cut_by_a_wrap_is_masked_in_the_triggerer(
    emu, creds, monkeypatch
):
    """The triggerer never read the token: the trigger registers it when it starts, so the
    failure message it relays masks it bare and cut by a line wrap."""
    token = "hf_TriggerSide0123456789WrapMeAcross"
    body = token.removeprefix("hf_")
    monkeypatch.setenv(
        "AIRFLOW_CONN_HF_TRIGGERSIDE", json.dumps({"conn_type": "http", "password": token})
    )
    monkeypatch.setenv("TPU_RL_HF_CONN_ID", "hf_triggerside")
    make_job(emu)
    make_pod(emu, "train-a")
    # a download tool prints the token bare, and the terminal wraps it after 14 characters
    emu.append_log(NS, "train-a", C, f"using {body[:14]}\n{body[14:]} for huggingface.co\n")
    emu.set_pod_phase(NS, "train-a", "Failed", exit_code=1, reason="Error")
    event = await first_event(RewardTrigger(**trigger_kwargs(emu)))
    assert event["reason"] == "pod_failed" and "for huggingface.co" in event["message"]
    assert body[:14] not in event["message"] and body[14:] not in event["message"]


async def test_a_job_seen_complete_before_its_pod_is_seen_ended_reads_the_log_to_its_end(
    emu, creds
):
    """The Job's and the pods' watches are two connections: the Job's Complete can arrive
    first, while the pods' last read shows the pod running. The poll must then read the pods
    again and the log to its end, not call the run `completed_without_result` while the
    Post line is still on its way (a new log response, as after the server ended the last)."""
    make_job(emu)
    make_pod(emu, "train-a")
    emu.append_log(NS, "train-a", C, pre())
    f = follower(emu, stream_log=True)
    watched = f.cluster.watched
    for fresh in watched.all():
        fresh.live = True  # the watches are up: they vouch for what the poll read
    assert await f.poll() is None
    await f.reader.close()  # the log's response ended; the next read opens another
    emu.append_log(NS, "train-a", C, post() + absl("RL Training Completed Successfully!"))
    emu.set_pod_phase(NS, "train-a", "Succeeded")
    emu.set_job_condition(NS, JOB, "Complete")
    watched.job.changed = True  # the Job's watch told; the pods' has not yet
    event = await f.poll()
    assert event is not None and event["status"] == "success", event
    await f.close()


async def test_completed_without_result(emu, creds):
    make_job(emu)
    make_pod(emu, "train-a")
    emu.append_log(NS, "train-a", C, absl("RL Training Completed Successfully!"))
    emu.set_pod_phase(NS, "train-a", "Succeeded")
    emu.set_job_condition(NS, JOB, "Complete")
    event = await first_event(RewardTrigger(**trigger_kwargs(emu)))
    assert event["reason"] == "completed_without_result"
    assert "RL Training Completed Successfully!" in event["message"]


async def test_post_line_in_a_completed_job_wins(emu, creds):
    make_job(emu)
    make_pod(emu, "train-a")
    emu.append_log(NS, "train-a", C, pre() + post())
    emu.set_pod_phase(NS, "train-a", "Succeeded")
    emu.set_job_condition(NS, JOB, "Complete")
    event = await first_event(RewardTrigger(**trigger_kwargs(emu)))
    assert event["status"] == "success"


@pytest.mark.parametrize("fault", ["condition", "deleted", "pods_gone", "pod_failed"])
async def test_backend_failed(emu, creds, fault):
    make_job(emu)
    make_pod(emu, "train-a")
    make_jobset(emu)
    make_pod(emu, f"{JOBSET}-worker-0-0", labels={"jobset.sigs.k8s.io/jobset-name": JOBSET})
    emu.append_log(NS, "train-a", C, step(10))
    f = follower(emu, backend_jobset_name=JOBSET)
    assert await f.poll() is None
    if fault == "condition":
        emu.set_jobset_condition(NS, JOBSET, "Failed", reason="FailedJobs", message="worker-0")
    elif fault == "deleted":
        emu.delete("jobsets", NS, JOBSET)
    elif fault == "pods_gone":
        emu.delete("pods", NS, f"{JOBSET}-worker-0-0")
    else:
        emu.set_pod_phase(NS, f"{JOBSET}-worker-0-0", "Failed", exit_code=2)
    event = await f.poll()
    assert event is not None and event["reason"] == "backend_failed", event
    assert JOBSET in event["message"]
    assert "Intermediate Eval (step=10)" in event["message"]


async def test_unschedulable_pod_reports_the_scheduler_reason(emu, creds):
    make_job(emu)
    make_pod(emu, "train-a", phase="Pending", conditions=[SCHEDULED_FALSE])
    event = await first_event(RewardTrigger(**trigger_kwargs(emu, pending_timeout=0.2)))
    assert event["reason"] == "unschedulable"
    assert "Insufficient google.com/tpu" in event["message"]


async def test_job_not_admitted_by_kueue_reports_events(emu, creds):
    make_job(emu, suspend=True)
    make_event(
        emu,
        f"{JOB}.1",
        JOB,
        "Pending",
        "couldn't assign flavors to pod set main: insufficient quota for google.com/tpu",
    )
    started = time.monotonic()
    event = await first_event(RewardTrigger(**trigger_kwargs(emu, pending_timeout=0.3)))
    assert time.monotonic() - started >= 0.3
    assert event["reason"] == "unschedulable"
    assert "suspended" in event["message"] and "insufficient quota" in event["message"]


async def test_pending_backend_counts_too(emu, creds):
    make_job(emu)
    make_pod(emu, "train-a")
    make_jobset(emu)
    labels = {"jobset.sigs.k8s.io/jobset-name": JOBSET}
    make_pod(
        emu, f"{JOBSET}-worker-0-0", labels=labels, phase="Pending", conditions=[SCHEDULED_FALSE]
    )
    kwargs = trigger_kwargs(emu, pending_timeout=0.2, backend_jobset_name=JOBSET)
    event = await first_event(RewardTrigger(**kwargs))
    assert event["reason"] == "unschedulable"
    assert f"{JOBSET}-worker-0-0" in event["message"] and "google.com/tpu" in event["message"]


async def test_pending_clock_resets_once_running(emu, creds):
    make_job(emu)
    make_pod(emu, "train-a", phase="Pending", conditions=[SCHEDULED_FALSE])
    f = follower(emu, pending_timeout=0.3)
    assert await f.poll() is None and f.state.pending_since is not None
    emu.set_pod_phase(NS, "train-a", "Running")
    assert await f.poll() is None and f.state.pending_since is None


async def test_deadline(emu, creds):
    make_job(emu)
    make_pod(emu, "train-a")
    emu.append_log(NS, "train-a", C, step(10))
    started = time.monotonic()
    event = await first_event(RewardTrigger(**trigger_kwargs(emu, deadline=time.time() + 0.3)))
    assert 0.25 <= time.monotonic() - started < 3
    assert event["reason"] == "timeout"
    assert "Intermediate Eval (step=10)" in event["message"]


async def test_missing_job(emu, creds):
    event = await follower(emu).poll()
    assert event is not None and event["reason"] == "job_failed" and "not found" in event["message"]


# -- surviving ------------------------------------------------------------------------------


async def test_rebuilt_trigger_continues_without_gaps_or_repeats(emu, creds, steps):
    make_job(emu)
    make_pod(emu, "train-a")
    clock = Clock()
    trigger = RewardTrigger(**trigger_kwargs(emu))
    task = asyncio.create_task(first_event(trigger))
    emu.append_log(NS, "train-a", C, pre(), at=clock())
    emu.append_log(NS, "train-a", C, step(10), at=clock())
    await wait_for(lambda: steps() == [10])
    emu.append_log(NS, "train-a", C, step(20), at=clock())
    await wait_for(lambda: steps() == [10, 20])
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    classpath, kwargs = trigger.serialize()
    assert classpath == "tpu_rl.rewards.trigger.RewardTrigger"
    kwargs = json.loads(json.dumps(kwargs))  # all state is plain JSON
    assert kwargs["state"]["pre"]["corr"] == 7
    # lines in the same second as the last one read, written while no trigger ran
    emu.append_log(NS, "train-a", C, step(30) + step(40), at=clock())
    emu.append_log(NS, "train-a", C, post(), at=clock())
    rebuilt = import_string(classpath)(**kwargs)
    event = await first_event(rebuilt)
    assert event["status"] == "success" and event["pre"]["corr"] == 7
    assert steps() == [10, 20, 30, 40]


def train_step(n: int) -> str:
    """Tunix's step line (tpu_rl.training_log.train_step)."""
    return (
        f"I1129 10:00:00.123456 140213 peft_trainer.py:735] Train step {n} training loss: "
        "0.500000  - training perplexity: 1.648721\n"
    )


@pytest.mark.parametrize(("logged", "stall"), [(120, None), (60, 60)], ids=["on", "stalled"])
async def test_a_wait_rebuilt_after_the_stall_floor_reads_the_backlog_before_a_stall(
    emu, creds, make_follower, logged, stall
):
    """A wait rebuilt two hours after its last step line (a triggerer restart) must not judge
    the silence before its new stream has delivered the steps logged a minute apart meanwhile,
    or it stops a healthy run as stalled (stream mode; a GET per poll reads them first). The
    backlog is judged first: no stall while the steps came (`on`), and one after the last
    step the backlog shows when they stopped an hour ago (`stalled`)."""
    make_job(emu)
    make_pod(emu, "train-a")
    start = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=120)
    for n in range(1, logged + 1):
        if n == 11:  # the wait is gone from here: its state saved, its position past step 10
            first = make_follower(watch={"health": {"stall_factor": 0.0}})
            assert await first.poll() is None
            assert first.state.health["last"][0] == 10
        emu.append_log(NS, "train-a", C, train_step(n), at=start + dt.timedelta(minutes=n))
    rebuilt = make_follower(state=FollowState.from_dict(first.state.as_dict()))  # the defaults
    event = await rebuilt.poll()
    if stall is None:
        assert event is None, event["message"]
        assert health.fatal(rebuilt.state.health) is None
    else:
        assert event is not None and event["reason"] == WaitEnd.TRAINING_UNHEALTHY, event
        assert event["anomaly"]["rule"] == health.STALL
        assert event["anomaly"]["step"] == stall, event["message"]
        assert f"Train step {stall} training loss" in event["message"]
    assert rebuilt.state.health["last"][0] == logged


async def test_throttling_and_server_errors_back_off(emu, creds):
    make_job(emu)
    make_pod(emu, "train-a")
    emu.append_log(NS, "train-a", C, pre() + post())
    emu.inject_faults(503, 2, path_regex=r"/log$", retry_after=0)
    emu.inject_faults(500, 1, path_regex=r"/pods$", retry_after=0)
    emu.inject_faults(429, 1, path_regex=r"/jobs/", retry_after=1)
    started = time.monotonic()
    event = await first_event(RewardTrigger(**trigger_kwargs(emu)))
    elapsed = time.monotonic() - started
    assert event["status"] == "success"
    statuses = [r.status for r in emu.requests]
    assert statuses.count(503) == 2 and statuses.count(500) == 1 and statuses.count(429) == 1
    assert 1.0 <= elapsed < 5  # waited out Retry-After: 1, then exponential from 0.05 s


async def test_api_down_until_the_deadline(emu, creds):
    make_job(emu)
    emu.inject_faults(503, 10_000)
    event = await first_event(RewardTrigger(**trigger_kwargs(emu, deadline=time.time() + 0.5)))
    assert event["reason"] == "timeout" and "503" in event["message"]


async def test_forbidden_is_not_retried(emu, creds):
    make_job(emu)
    emu.inject_faults(403, 1)
    event = await first_event(RewardTrigger(**trigger_kwargs(emu)))
    assert event["reason"] == "api_error" and "403" in event["message"]
    assert len(emu.requests) == 1


async def test_expired_token_reconnects_with_a_fresh_one(emu, creds, make_follower):
    make_job(emu)
    make_pod(emu, "train-a")
    f = make_follower()
    emu.append_log(NS, "train-a", C, step(10))
    assert await f.poll() is None
    emu.set_token("tok-2")
    # A new connection gets the cached token first, then the refreshed one; a stream's open
    # client (the event loop's, shared by its polls) already holds the cached token.
    creds.queue = ["tok-2"] if f.stream_log else ["tok-1", "tok-2"]
    emu.append_log(NS, "train-a", C, post())
    event = await f.poll()
    assert event is not None and event["status"] == "success"
    assert [r.status for r in emu.requests].count(401) == 1


async def test_token_that_stays_rejected_fails_clearly(emu, creds):
    make_job(emu)
    emu.set_token("tok-2")  # the credentials keep handing out tok-1
    event = await follower(emu).poll()
    assert event is not None and event["reason"] == "api_error"
    assert "401" in event["message"] and "tok-1" not in event["message"]
    assert [r.status for r in emu.requests] == [401, 401]


async def test_bytes_fetched_stay_close_to_the_log_size(emu, creds):
    """Twelve polls over a growing log read it about once, not polls x size."""
    make_job(emu)
    make_pod(emu, "train-a")
    f = follower(emu)
    at = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    rendered = 0
    for batch in range(12):
        lines = [
            f"I1129 10:{batch:02d}:{i:02d}.000000 140213 rl_cluster.py:311] actor step "
            f"{batch * 20 + i}: loss=0.{i:04d} rewards/mean=0.{batch:04d} kl=0.0012\n"
            for i in range(20)
        ]
        if batch == 11:
            lines.append(post())
        for line in lines:  # 20 lines over 5 s of log time per poll
            at += dt.timedelta(seconds=0.25)
            emu.append_log(NS, "train-a", C, line, at=at)
            rendered += len(rfc3339nano(at)) + 1 + len(line)
        event = await f.poll()
    assert event is not None and event["status"] == "success"
    fetched = sum(r.response_bytes for r in log_requests(emu))
    assert rendered <= fetched <= 1.3 * rendered, (fetched, rendered)
    assert f.bytes_read >= fetched


async def test_streamed_log_is_fetched_about_once_over_many_polls(emu, creds, steps):
    """56 polls, 4 per second of log time, fetch the log about once: one stream, no re-reads."""
    make_job(emu)
    make_pod(emu, "train-a")
    f = follower(emu, stream_log=True)
    at = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    rendered = 0
    try:
        assert await f.poll() is None  # opens the stream
        for n in range(1, 56):
            lines = [
                f"I1129 10:00:{n % 60:02d}.000000 140213 rl_cluster.py:311] actor step {n}.{i}: "
                f"loss=0.{i:04d} rewards/mean=0.{n:04d} kl=0.0012\n"
                for i in range(3)
            ]
            lines += [step(n), *([post()] if n == 55 else [])]
            at += dt.timedelta(seconds=0.25)
            emu.append_log(NS, "train-a", C, "".join(lines), at=at)
            rendered += sum(len(rfc3339nano(at)) + 1 + len(line) for line in lines)
            # read as it comes (logged once the next poll saved the position past it)
            await wait_for(lambda n=n: f.found() is not None or n in read_steps(f))
            event = await f.poll()
            assert (event is None) == (n < 55)
    finally:
        await f.close()
    assert event is not None and event["status"] == "success"
    assert steps() == list(range(1, 56))
    await wait_for(lambda: log_requests(emu))  # recorded once the emulator sees the close
    (stream,) = log_requests(emu)
    assert stream.query["follow"] == "true"
    assert rendered <= stream.response_bytes <= 1.2 * rendered, (stream.response_bytes, rendered)
    assert f.bytes_read >= stream.response_bytes


class Relay:
    """A TCP relay to the emulator (TLS passes through) whose connections a test can break."""

    def __init__(self, emu: KubeEmulator) -> None:
        self.target = emu.port
        self.connections: list[asyncio.StreamWriter] = []
        self.url = ""

    async def __aenter__(self) -> "Relay":
        self.server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.url = f"https://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.cut()
        self.server.close()
        await self.server.wait_closed()

    def cut(self) -> None:
        """Break every open connection, as a network failure or a server going away does."""
        for writer in self.connections:
            writer.transport.abort()
        self.connections.clear()

    async def _relay(self, client: asyncio.StreamReader, to_client: asyncio.StreamWriter) -> None:
        server, to_server = await asyncio.open_connection("127.0.0.1", self.target)
        self.connections += [to_client, to_server]
        await asyncio.gather(
            _pipe(client, to_server), _pipe(server, to_client), return_exceptions=True
        )


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()


async def test_stream_broken_mid_line_resumes_without_gaps_or_repeats(emu, creds, steps):
    make_job(emu)
    make_pod(emu, "train-a")
    clock = Clock()  # lines ms apart: the reopened stream sends their second again
    async with Relay(emu) as relay:
        f = follower(emu, cluster_url=relay.url, stream_log=True)
        try:
            emu.append_log(NS, "train-a", C, pre(), at=clock())
            emu.append_log(NS, "train-a", C, step(10), at=clock())
            emu.append_log(NS, "train-a", C, step(20)[:30], at=clock())
            assert await f.poll() is None
            await poll_until(f, lambda: steps() == [10])
            relay.cut()  # the stream breaks with half a line received
            emu.append_log(NS, "train-a", C, step(20)[30:] + step(30), at=clock())
            await poll_until(f, lambda: steps() == [10, 20, 30])  # reopened from the last second
            emu.append_log(NS, "train-a", C, post(), at=clock())
            await wait_for(lambda: f.found() is not None)
            event = await f.poll()
        finally:
            await f.close()
    assert event is not None and event["status"] == "success" and event["pre"]["corr"] == 7
    assert steps() == [10, 20, 30]
    await wait_for(lambda: len(log_requests(emu)) == 2)
    first, second = (r.query for r in log_requests(emu))
    assert first["follow"] == second["follow"] == "true"
    assert "sinceTime" not in first and "sinceTime" in second


async def test_restart_while_streaming_moves_to_the_new_instance(emu, creds, steps):
    """The old instance's tail comes by a one-shot previous=true GET; its stream is closed."""
    make_job(emu)
    make_pod(emu, "train-a")
    f = follower(emu, stream_log=True)
    try:
        emu.append_log(NS, "train-a", C, pre() + step(10))
        assert await f.poll() is None
        emu.append_log(NS, "train-a", C, step(20))  # streamed, not consumed before the crash
        emu.restart_container(NS, "train-a", C)
        emu.append_log(NS, "train-a", C, pre(corr=8) + step(10, reward=0.5))
        assert await f.poll() is None
        await poll_until(f, lambda: steps() == [10, 20, 10])
        await wait_for(lambda: len(log_requests(emu)) == 2)  # the old stream was closed
        previous, old = sorted(log_requests(emu), key=lambda r: "follow" in r.query)
        assert previous.query["previous"] == "true" and "follow" not in previous.query
        assert old.query["follow"] == "true" and "sinceTime" not in old.query
        emu.append_log(NS, "train-a", C, post())
        await wait_for(lambda: f.found() is not None)
        event = await f.poll()
    finally:
        await f.close()
    assert event is not None and event["status"] == "success" and event["pre"]["corr"] == 8
    assert steps() == [10, 20, 10]
    await wait_for(lambda: len(log_requests(emu)) == 3)
    new = log_requests(emu)[2].query
    assert new["follow"] == "true" and "sinceTime" not in new  # the new log from its start


async def test_cancelled_trigger_closes_its_stream(emu, creds, steps):
    make_job(emu)
    make_pod(emu, "train-a")
    trigger = RewardTrigger(**trigger_kwargs(emu))
    task = asyncio.create_task(first_event(trigger))
    emu.append_log(NS, "train-a", C, step(10))
    await wait_for(lambda: steps() == [10])
    assert log_requests(emu) == []  # the stream is open: recorded when it ends
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_for(lambda: len(log_requests(emu)) == 1)  # the emulator saw the client go
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del trigger, task
        gc.collect()
    assert [str(w.message) for w in caught if "Unclosed" in str(w.message)] == []


async def test_state_round_trip():
    state = FollowState(pod_uid="u", last_time="2026-01-01T00:00:00.5Z", seen_at_last_time=2)
    assert FollowState.from_dict(json.loads(json.dumps(state.as_dict()))) == state
    saved_before = {**state.as_dict(), "seen_at_last_time": ["a", "b"]}  # hashes, as once saved
    assert FollowState.from_dict(saved_before) == state


# -- with the sandbox's simulated controller and MaxText workload scripts --------------------


def pathways_jobset(worker_restart: str = "Never") -> dict[str, Any]:
    def rjob(name: str, pods: int, containers: list[str], restart: str) -> dict[str, Any]:
        return {
            "name": name,
            "replicas": 1,
            "template": {
                "spec": {
                    "completionMode": "Indexed",
                    "completions": pods,
                    "parallelism": pods,
                    "backoffLimit": 0,
                    "template": {
                        "spec": {
                            "restartPolicy": restart,
                            "containers": [{"name": c, "image": "pathways"} for c in containers],
                        }
                    },
                }
            },
        }

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": JOBSET, "namespace": NS},
        "spec": {
            "coordinator": {"replicatedJob": "pathways-head"},
            "failurePolicy": {"maxRestarts": 0},
            "replicatedJobs": [
                rjob("pathways-head", 1, ["pathways-proxy", "pathways-rm"], "Never"),
                rjob("worker", 2, ["pathways-worker"], worker_restart),
            ],
        },
    }


async def test_simulated_grpo_run(emu, creds, steps):
    script = grpo_client_script(num_batches=20, eval_every=5)
    with Controller(emu, Scenario().on("grpo", script), time_scale=0.0005):
        make_job(emu)
        event, reports = await end_event(trigger_kwargs(emu, watch={"total_steps": 20}))
    assert event["status"] == "success", event
    # a report once the pace is known, if a poll saw it before the end: the wait went on from
    # its state to the same end (the step lines come fast here: none may be seen running)
    assert all(r["progress"]["total_steps"] == 20 for r in reports), reports
    # then every progress_report_minutes (15) or every tenth of the steps, whichever
    # comes first: a new report is at least 2 of the 20 steps past the one before it
    reported = [r["progress"]["step"] for r in reports]
    assert all(b - a >= 2 for a, b in itertools.pairwise(reported)), reported
    assert event["pre"]["corr"] == DEFAULT_PRE.corr
    assert event["post"]["corr"] == DEFAULT_POST.corr
    assert event["post"]["mean_reward"] == DEFAULT_POST.mean_reward
    assert steps() == [5, 10, 15]


@pytest.mark.parametrize(
    ("kwargs", "reasons", "text"),
    [
        ({"post": None}, {"completed_without_result"}, "RL Training Completed Successfully!"),
        ({"fail_at_step": 3}, {"pod_failed", "job_failed"}, "Pathways worker disconnected"),
    ],
)
async def test_simulated_grpo_faults(emu, creds, kwargs, reasons, text):
    script = grpo_client_script(num_batches=5, **kwargs)
    with Controller(emu, Scenario().on("grpo", script), time_scale=0.0005):
        make_job(emu)
        event = await first_event(RewardTrigger(**trigger_kwargs(emu)))
    assert event["reason"] in reasons, event
    assert text in event["message"]


async def test_simulated_backend_worker_crash(emu, creds):
    scenario = (
        Scenario()
        .on("grpo", grpo_client_script(num_batches=50))
        .on("pathways-head", pathways_server_script("resource_manager"))
        .on("worker", crashing_worker_script(after_s=20), index=1)
        .on("worker", pathways_server_script("worker"))
    )
    with Controller(emu, scenario, time_scale=0.01):
        emu.create(pathways_jobset())
        make_job(emu)
        kwargs = trigger_kwargs(emu, backend_jobset_name=JOBSET)
        event = await first_event(RewardTrigger(**kwargs))
    assert event["reason"] == "backend_failed", event
    assert JOBSET in event["message"]


async def test_the_backend_is_deleted_the_moment_the_wait_ends(emu, creds):
    """The TPUs are released by the trigger itself, before Airflow resumes the task."""
    make_job(emu)
    make_pod(emu, "train-a")
    make_jobset(emu)
    emu.append_log(NS, "train-a", C, pre() + post())
    event = await first_event(RewardTrigger(**trigger_kwargs(emu, backend_jobset_name=JOBSET)))
    assert event["status"] == "success"
    assert emu.get("jobsets", NS, JOBSET) is None


async def test_a_failed_wait_releases_the_backend_too(emu, creds):
    make_job(emu)
    make_pod(emu, "train-a")
    make_jobset(emu)
    emu.set_job_condition(NS, JOB, "Failed", reason="BackoffLimitExceeded")
    event = await first_event(RewardTrigger(**trigger_kwargs(emu, backend_jobset_name=JOBSET)))
    assert event["reason"] == "job_failed"
    assert emu.get("jobsets", NS, JOBSET) is None


# -- push latency, restarts, capacity waits --------------------------------------------------


async def test_post_line_ends_the_wait_at_once_whatever_the_poll_interval(emu, creds):
    make_job(emu)
    make_pod(emu, "train-a")
    emu.append_log(NS, "train-a", C, pre())
    task = await started(RewardTrigger(**trigger_kwargs(emu, poll_interval=SLOW_POLL)))
    logged = time.monotonic()
    emu.append_log(NS, "train-a", C, post())
    event = await task
    assert event["status"] == "success" and event["pre"]["corr"] == 7
    assert time.monotonic() - logged < SLOW_POLL / 2  # not the timer's poll


async def test_job_failure_ends_the_wait_at_once_whatever_the_poll_interval(emu, creds):
    make_job(emu)
    make_pod(emu, "train-a")
    task = await started(RewardTrigger(**trigger_kwargs(emu, poll_interval=SLOW_POLL)))
    failed = time.monotonic()
    emu.set_job_condition(NS, JOB, "Failed", reason="BackoffLimitExceeded")
    event = await task
    assert event["reason"] == "job_failed" and "BackoffLimitExceeded" in event["message"]
    assert time.monotonic() - failed < SLOW_POLL / 2  # not the timer's poll


async def test_rebuilt_trigger_resumes_from_the_position_saved_on_the_job(emu, creds, steps):
    """A triggerer restart rebuilds the trigger from its deferral kwargs (no position in
    them): it resumes from the Job's annotation, logs no line twice, re-reads little."""
    make_job(emu)
    make_pod(emu, "train-a")
    kwargs = trigger_kwargs(emu, poll_interval=SLOW_POLL)
    clock = Clock(gap=1.1)  # one line a second: sinceTime sends only the last one again
    for line in (pre(), step(10), step(20)):
        emu.append_log(NS, "train-a", C, line, at=clock())
    first = await started(RewardTrigger(**kwargs))
    await wait_for(lambda: steps() == [10, 20])

    def saved() -> str:
        (job,) = emu.list("jobs", NS)
        return job["metadata"].get("annotations", {}).get(POSITION_ANNOTATION, "")

    await wait_for(lambda: '"reward_lines": 3' in saved())
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    read_before = sum(r.response_bytes for r in log_requests(emu))
    emu.append_log(NS, "train-a", C, step(30), at=clock())
    task = await started(RewardTrigger(**kwargs))
    emu.append_log(NS, "train-a", C, post(), at=clock())
    event = await task
    assert event["status"] == "success" and event["pre"]["corr"] == 7
    assert steps() == [10, 20, 30]
    await wait_for(lambda: len(log_requests(emu)) == 2)
    resumed = log_requests(emu)[1]
    assert "sinceTime" in resumed.query
    reread = resumed.response_bytes - len(step(30)) - len(post())
    assert reread < len(step(20)) + 100, (reread, read_before)


def pods_trigger(emu: KubeEmulator, **overrides: Any) -> PodsReadyTrigger:
    kwargs: dict[str, Any] = {
        "cluster_url": emu.url,
        "ssl_ca_cert": emu.ca_b64,
        "namespace": NS,
        "what": f"backend JobSet {JOBSET}",
        "owner_path": kube.jobset_path(NS, JOBSET),
        "selector": f"{kube.JOBSET_NAME_LABEL}={JOBSET}",
        "expected": 2,
        "need_running": True,
        "deadline": time.time() + 20,
        "poll_interval": SLOW_POLL,
    }
    kwargs.update(overrides)
    classpath, serialized = PodsReadyTrigger(**kwargs).serialize()
    return import_string(classpath)(**serialized)


def backend_pod(emu: KubeEmulator, name: str, phase: str = "Pending") -> None:
    make_pod(emu, name, labels={kube.JOBSET_NAME_LABEL: JOBSET}, phase=phase)


async def test_capacity_wait_ends_the_moment_the_last_pod_runs(emu, creds):
    make_jobset(emu)
    backend_pod(emu, "pw-head", "Running")
    backend_pod(emu, "pw-worker")
    task = await started(pods_trigger(emu))
    running = time.monotonic()
    emu.set_pod_phase(NS, "pw-worker", "Running")
    assert await task == {"status": "success"}
    assert time.monotonic() - running < SLOW_POLL / 2  # not the timer's poll


async def test_capacity_wait_fails_on_a_failed_pod_a_missing_owner_or_the_deadline(emu, creds):
    assert "not found" in (await first_event(pods_trigger(emu)))["message"]
    make_jobset(emu, suspend=True)
    event = await first_event(pods_trigger(emu, deadline=time.time() + 0.5))
    assert event["status"] == "error" and "not admitted by Kueue" in event["message"]
    backend_pod(emu, "pw-head")
    task = await started(pods_trigger(emu))
    emu.set_pod_phase(NS, "pw-head", "Failed")
    event = await task
    assert event["status"] == "error" and "pod pw-head" in event["message"]


async def test_a_refused_position_save_does_not_end_the_wait(emu, creds, monkeypatch):
    """Without RBAC to patch Jobs the wait goes on; only a restart then reads more again."""
    calls: list[str] = []

    async def refused(self: AsyncKube, path: str, body: dict[str, Any]) -> None:
        calls.append(path)
        raise KubeApiError(403, f"PATCH {path}: forbidden")

    monkeypatch.setattr(AsyncKube, "merge_patch", refused)
    make_job(emu)
    make_pod(emu, "train-a")
    emu.append_log(NS, "train-a", C, pre() + step(10))
    task = await started(RewardTrigger(**trigger_kwargs(emu)))
    emu.append_log(NS, "train-a", C, step(20) + post())
    event = await task
    assert event["status"] == "success" and len(calls) == 1


async def test_capacity_wait_ends_within_one_poll_when_kueue_can_never_admit(emu, creds):
    make_jobset(emu, suspend=True)
    never = (
        "couldn't assign flavors to pod set pathways-head: resource cpu unavailable in ClusterQueue"
    )
    emu.create(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {
                "name": f"jobset-{JOBSET}-1a2b3",
                "namespace": NS,
                "ownerReferences": [{"kind": "JobSet", "name": JOBSET}],
            },
            "status": {
                "conditions": [
                    {
                        "type": "QuotaReserved",
                        "status": "False",
                        "reason": "Pending",
                        "message": never,
                    }
                ]
            },
        }
    )
    started_at = time.monotonic()
    event = await first_event(pods_trigger(emu, queued=True))
    assert event["reason"] == verdicts.KUEUE_REFUSED and never in event["message"]
    assert time.monotonic() - started_at < SLOW_POLL
    event = await first_event(pods_trigger(emu, deadline=time.time() + 0.5))
    assert event["reason"] == "pending_timeout"  # not queued: Kueue is not read


async def test_capacity_wait_times_out_with_the_schedulers_reason(emu, creds):
    make_job(emu)
    said = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    unschedulable = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": said,
    }
    make_pod(emu, "convert-a", phase="Pending", conditions=[unschedulable])
    trigger = pods_trigger(
        emu,
        what=f"Job {JOB}",
        owner_path=kube.job_path(NS, JOB),
        selector=f"job-name={JOB}",
        expected=1,
        need_running=False,
        deadline=time.time() + 0.5,
    )
    event = await first_event(trigger)
    assert event["status"] == "error" and event["reason"] == "pending_timeout"
    assert "0/1 pods scheduled" in event["message"] and said in event["message"]


async def test_a_post_line_read_as_a_progress_report_leaves_ends_the_wait(emu, creds, monkeypatch):
    """The log stream reads on in the background: a Post line it reads after the poll that
    chose a progress report, before the trigger closes the stream, ends the wait. The report's
    state is past that line already, so a wait rebuilt from it would find no Post line and end
    with `completed_without_result` (seen under load in tests/e2e/test_catalogue_cells.py)."""
    make_job(emu)
    make_pod(emu, "train-a")
    clock = Clock()
    emu.append_log(NS, "train-a", C, pre(), at=clock())
    for n in (1, 2, 3):
        emu.append_log(NS, "train-a", C, absl(f"Train step {n} training loss: 0.5"), at=clock())
    waited = RewardTrigger._wait

    async def post_read_after_the_report(self: RewardTrigger) -> dict[str, Any]:
        payload = await waited(self)
        assert payload["reason"] == PROGRESS_EVENT, payload
        emu.append_log(NS, "train-a", C, post(), at=clock())
        await wait_for(lambda: self.follower.found() is not None)  # the stream read it
        return payload

    monkeypatch.setattr(RewardTrigger, "_wait", post_read_after_the_report)
    event = await first_event(RewardTrigger(**trigger_kwargs(emu, watch={"total_steps": 6})))
    assert event["status"] == "success", event
    assert event["post"]["corr"] == 12
