"""RewardTrigger: wait in the triggerer for the training Job's `Post RL Training:` line.

The log is read as it arrives and the Job, its pods and the backend's pods are watched, so
the Post line or a failure ends the wait within about a second whatever `poll_interval` is;
the poll on a timer is a backstop (pending timeouts, a watch that is down): while the watches
are up, a poll reads again only what they report changed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from tpu_rl import deployment
from tpu_rl.kube import objects as kube
from tpu_rl.kube.async_client import KubeApiError
from tpu_rl.kube.shared_watch import NAME, Subscriber, Subscription, subscribed
from tpu_rl.kube.watch import news_or_timeout
from tpu_rl.rewards.poll import LogFollower
from tpu_rl.token_masking import aregister_hf_token
from tpu_rl.watch import progress
from tpu_rl.watch.ends import STOPS_TRAINING, Result
from tpu_rl.watch.state import FollowState

BACKOFF_CAP_S = 60.0
MIN_POLL_GAP_S = 0.5  # polls on news come at most this often
BACKEND_KEPT = "backend_kept"  # a success event's key: the backend was left running


# The follow parameters a version before WatchRules serialized one by one: a task deferred then
# and resumed by this version's triggerer (an upgrade mid-run) keeps them, in the bundle.
UNBUNDLED = {
    "checkpoint_period": "checkpoint_period",
    "total_steps": "total_steps",
    "capacity_ends_at": "capacity_ends_at",
    "spend": "spend",
    "health_rules": "health",
    "progress_every_s": "progress_every_s",
}


def bundled(follow: dict[str, Any]) -> dict[str, Any]:
    """LogFollower's keyword arguments with the parameters of UNBUNDLED in `watch`."""
    loose = {UNBUNDLED[k]: v for k, v in follow.items() if k in UNBUNDLED}
    if not loose:
        return follow
    kept = {k: v for k, v in follow.items() if k not in UNBUNDLED}
    return {**kept, "watch": {**loose, **(follow.get("watch") or {})}}


class RewardTrigger(BaseTrigger):
    """Defers until the training Job logs `Post RL Training:`, or fails fast with the reason.

    Airflow rebuilds a trigger from the kwargs it had at deferral; the follower also saves
    its position on the training Job, so a rebuilt trigger resumes there (see
    `rewards.position`): after each poll that read a line, and when the triggerer stops it;
    at its cadence it reports the training's progress (`progress.PROGRESS_EVENT`, with its
    state: the task writes it to the run's page and note and defers again from there);
    what it logs of the lines is said once that position is saved (`rewards.held_log`), so a
    triggerer killed in between logs none of them twice. When the
    wait ends, or the task is killed, the backend JobSet is deleted: its TPUs are free at once;
    with `keep_backend`, a successful wait leaves it running (the champion is evaluated on it
    next) and its event says so (`backend_kept`).
    """

    def __init__(
        self,
        *,
        poll_interval: float = 30.0,
        state: dict[str, Any] | None = None,
        keep_backend: bool = False,
        **follow: Any,
    ) -> None:
        """`follow`: LogFollower's keyword arguments (cluster_url, ssl_ca_cert, namespace,
        job_name, deadline, and optionally gcp_conn_id, impersonation_chain, use_dns_endpoint,
        container_name, backend_jobset_name, pending_timeout)."""
        super().__init__()  # type: ignore[no-untyped-call]  # Airflow: unannotated
        self.poll_interval = poll_interval
        self.keep_backend = keep_backend
        self.follow = follow = bundled(follow)
        self.follower = LogFollower(
            **follow,
            state=FollowState.from_dict(state),
            log=self.log,
            stream_log=True,
            report_progress=True,
        )

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "tpu_rl.rewards.trigger.RewardTrigger",
            {
                **self.follow,
                "poll_interval": self.poll_interval,
                "keep_backend": self.keep_backend,
                "state": self.follower.state.as_dict(),
            },
        )

    def _subscriptions(self) -> list[Subscription]:
        """The Job by name, its pods and the backend's pods by label, each with the
        freshness of what the poll last read of them (`f.cluster.watched`)."""
        f, watched = self.follower, self.follower.cluster.watched
        jobs, pods = kube.jobs_path(f.namespace), kube.pods_path(f.namespace)
        subs = [
            Subscription(jobs, NAME, f.job_name, f.news, watched.job),
            Subscription(pods, "job-name", f.job_name, f.news, watched.pods),
        ]
        if f.backend_jobset_name:
            label, backend = kube.JOBSET_NAME_LABEL, f.backend_jobset_name
            subs.append(Subscription(pods, label, backend, f.news, watched.backend))
        return subs

    async def run(self) -> AsyncIterator[TriggerEvent]:
        follower = self.follower
        # The triggerer never read the token: registered here, it is masked in the lines and
        # failure messages this trigger relays from the training pods.
        await aregister_hf_token(deployment.hf_conn_id())
        try:
            payload = await self._wait()
            if payload.get("reason") == progress.PROGRESS_EVENT:
                await follower.settle()  # the next trigger reads again about one line
        # A stopping triggerer cancels its triggers: its runner's SIGINT handler ends
        # `TriggerRunner.arun` and `asyncio.run` cancels the tasks left and waits for them
        # (Airflow's jobs/triggerer_job_runner.py, TriggerRunner._handle_signal and run).
        except asyncio.CancelledError:
            await follower.stop()
            raise
        finally:
            # The log stream reads on in the background until it is closed: it may have read
            # the Post line (or the log's end) since the poll that chose a progress report, and
            # the state it leaves is past that line, so that end is this wait's, not a report's
            # (a wait rebuilt from the report would find no Post line). Closing drops it.
            found = follower.found()
            await follower.close()
        if payload.get("reason") == progress.PROGRESS_EVENT and found is not None:
            follower.held.tell()  # what the lines read since said, as a poll's end does
            payload = {**found, "curves": follower.state.curves} if follower.state.curves else found
        if payload.get("reason") == progress.PROGRESS_EVENT:
            # training runs on: the task writes the progress and defers again from this state,
            # past the lines read since the poll, so what they said is said here
            follower.held.tell()
            payload = {**payload, "state": follower.state.as_dict()}
        elif self.keep_backend and payload.get("status") == "success":
            payload = {**payload, BACKEND_KEPT: True}
        else:
            # a fatal watchdog rule too: no step, no save past the anomaly; the TPUs stop billing
            if payload.get("reason") in STOPS_TRAINING:
                await follower.stop_training()
            await follower.release_backend()
        yield TriggerEvent(payload)

    async def on_kill(self) -> None:
        """The task was killed (marked failed, cleared): free the backend's TPUs too."""
        await self.follower.release_backend()

    async def _wait(self) -> Result:
        """Poll on news or every poll_interval until there is an event; back off on
        transient API errors. Joined before the first poll to the watches the process has
        (what that poll reads, they vouch for from then on); those it lacks are started
        after the first quiet poll (a wait whose first poll ends it starts none)."""
        f = self.follower
        async with subscribed(f.hook.get_conn, f.connection, self._subscriptions()) as subscriber:
            return await self._poll_until_event(subscriber)

    async def _poll_until_event(self, subscriber: Subscriber) -> Result:
        failures, last_error = 0, None
        while True:
            polled = time.monotonic()
            self.follower.news.clear()
            try:
                payload = await self.follower.poll()
            except KubeApiError as error:
                failures, last_error = failures + 1, error
                remaining = self.follower.deadline - time.time()
                cap = max(BACKOFF_CAP_S, self.poll_interval)
                delay = min(cap, self.poll_interval * 2 ** (failures - 1))
                delay = max(0.0, min(max(delay, error.retry_after or 0), remaining))
                self.log.warning("Kubernetes API: %s; retrying in %.1fs", error, delay)
                await asyncio.sleep(delay)
                continue
            if payload is not None:
                if payload.get("reason") == "timeout" and failures:
                    payload["message"] += f"; the Kubernetes API was failing: {last_error}"
                return payload
            failures = 0
            subscriber.start()
            await self._news_or_timer(polled)

    async def _news_or_timer(self, polled: float) -> None:
        """Wait for news (a log result or line, a watched change) or the poll interval."""
        remaining = self.poll_interval - (time.monotonic() - polled)
        if not await news_or_timeout(self.follower.news, remaining):
            return
        if self.follower.found() is None:
            await asyncio.sleep(max(0.0, MIN_POLL_GAP_S - (time.monotonic() - polled)))
