"""The process's shared watches (tpu_rl.kube.shared_watch) over HTTPS against the sandbox's
Kubernetes API emulator: one watch per connection, namespace and kind, each event told to
the waits it concerns only, whatever their runs, namespaces or cancellations."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from typing import Any

import pytest
from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEKubernetesAsyncHook

from tests.support.kube_wait import (
    JOB,
    NS,
    SLOW_POLL,
    C,
    make_job,
    make_pod,
    post,
    pre,
    started,
    trigger_kwargs,
)
from tpu_rl.kube import objects as kube
from tpu_rl.kube.async_client import AsyncKube
from tpu_rl.kube.shared_watch import NAME, Subscription, subscribed
from tpu_rl.kube.watch import Freshness
from tpu_rl.rewards.trigger import RewardTrigger

pytestmark = pytest.mark.asyncio
OTHER_NS = "team-b"


@pytest.fixture
def watches_opened(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many watch requests were sent, by collection path."""
    opened: Counter[str] = Counter()
    real = AsyncKube.watch

    def spy(self: AsyncKube, path: str, query: list[tuple[str, str]], **kwargs: Any) -> Any:
        opened[path] += 1
        return real(self, path, query, **kwargs)

    monkeypatch.setattr(AsyncKube, "watch", spy)
    return opened


def pod(box: Any, name: str, job: str, namespace: str = NS) -> None:
    box.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"job-name": job}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": C, "image": "maxtext"}]},
        }
    )


def pods_of(job: str, namespace: str = NS) -> Subscription:
    path = kube.pods_path(namespace)
    return Subscription(path, "job-name", job, asyncio.Event(), Freshness())


def connect_to(box: Any) -> Any:
    return GKEKubernetesAsyncHook(cluster_url=box.url, ssl_ca_cert=box.ca_b64).get_conn


async def live(*subs: Subscription, timeout: float = 5) -> None:
    """Wait until the watches vouch for the subscriptions, their news so far taken."""
    end = time.monotonic() + timeout
    while not all(s.fresh.live for s in subs):
        assert time.monotonic() < end, "the watch did not open"
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.3)  # the ADDED events of a watch started afresh
    for sub in subs:
        sub.fresh.take()
        sub.news.clear()


async def told(sub: Subscription, timeout: float = 3) -> bool:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            await sub.news.wait()
    return sub.news.is_set()


async def test_runs_in_a_namespace_share_a_watch_each_hearing_its_own(emu, creds, watches_opened):
    pod(emu, "a-0", "job-a")
    pod(emu, "b-0", "job-b")
    a, b = pods_of("job-a"), pods_of("job-b")
    async with subscribed(connect_to(emu), "cluster", [a, b]) as subscriber:
        subscriber.start()
        await live(a, b)
        emu.set_pod_phase(NS, "a-0", "Failed", exit_code=1)
        assert await told(a) and a.fresh.take()
        assert not await told(b, timeout=0.5) and not b.fresh.take()
        emu.set_pod_phase(NS, "b-0", "Running")
        assert await told(b)
    assert watches_opened == {kube.pods_path(NS): 1}
    assert not a.fresh.live and not b.fresh.live  # no longer vouched for


async def test_other_namespaces_and_credentials_watch_apart(emu, creds, watches_opened):
    emu.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OTHER_NS}})
    pod(emu, "x-0", "job-x")
    pod(emu, "x-0", "job-x", namespace=OTHER_NS)  # the same names, in another namespace
    here, there = pods_of("job-x"), pods_of("job-x", OTHER_NS)
    other_credentials = pods_of("job-x")
    async with (
        subscribed(connect_to(emu), "cluster", [here, there]) as one,
        subscribed(connect_to(emu), "cluster as someone else", [other_credentials]) as two,
    ):
        one.start()
        two.start()
        await live(here, there, other_credentials)
        emu.set_pod_phase(OTHER_NS, "x-0", "Running")
        assert await told(there)
        assert not await told(here, timeout=0.5)
        assert not other_credentials.news.is_set()
        emu.set_pod_phase(NS, "x-0", "Running")
        assert await told(here) and await told(other_credentials)
    assert watches_opened == {kube.pods_path(NS): 2, kube.pods_path(OTHER_NS): 1}


async def test_a_cancelled_wait_leaves_the_watch_to_others(emu, creds, watches_opened):
    make_job(emu)
    pod(emu, "a-0", "job-a")
    pod(emu, "b-0", "job-b")
    a, b = pods_of("job-a"), pods_of("job-b")
    job = Subscription(kube.jobs_path(NS), NAME, JOB, asyncio.Event(), Freshness())
    entered = asyncio.Event()

    async def wait(subs: list[Subscription]) -> None:
        async with subscribed(connect_to(emu), "cluster", subs) as subscriber:
            subscriber.start()
            entered.set()
            await asyncio.sleep(3600)

    first = asyncio.create_task(wait([a, job]))
    await entered.wait()
    second = asyncio.create_task(wait([b]))
    await live(a, b, job)
    first.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await first
    assert not a.fresh.live and not job.fresh.live
    emu.set_pod_phase(NS, "b-0", "Running")
    emu.set_pod_phase(NS, "a-0", "Running")
    emu.set_job_condition(NS, JOB, "Failed", reason="BackoffLimitExceeded")
    assert await told(b) and b.fresh.live  # the watch the first wait started goes on
    assert not a.news.is_set() and not job.news.is_set()
    second.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await second
    assert watches_opened == {kube.pods_path(NS): 1, kube.jobs_path(NS): 1}
    assert [t for t in asyncio.all_tasks() if "watch_collection" in repr(t)] == []


async def test_two_reward_waits_in_one_triggerer(emu, creds, watches_opened):
    """Two RewardTriggers in one event loop: one watch of Jobs and one of pods for both;
    the one whose Job fails ends at once, the other goes on to its Post line."""
    other = f"{JOB}-2"
    for job in (JOB, other):
        emu.create(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": job, "namespace": NS},
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": C, "image": "m"}],
                        }
                    }
                },
            }
        )
        make_pod(emu, f"{job}-pod", labels={"job-name": job})
        emu.append_log(NS, f"{job}-pod", C, pre())
    failing = await started(RewardTrigger(**trigger_kwargs(emu, poll_interval=SLOW_POLL)))
    going_on = await started(
        RewardTrigger(**trigger_kwargs(emu, job_name=other, poll_interval=SLOW_POLL))
    )
    failed = time.monotonic()
    emu.set_job_condition(NS, JOB, "Failed", reason="BackoffLimitExceeded")
    event = await failing
    assert event["reason"] == "job_failed" and time.monotonic() - failed < 2.0
    await asyncio.sleep(0.5)
    assert not going_on.done()
    emu.append_log(NS, f"{other}-pod", C, post())
    assert (await going_on)["status"] == "success"
    assert watches_opened == {kube.jobs_path(NS): 1, kube.pods_path(NS): 1}
