"""One poll of the reward wait: read the training pod's new log lines, judge Job and backend.

The trigger keeps the log open as one `follow=true` stream read as it arrives and polls on
news; the reschedule-mode sensor polls once per poke, GETting the lines since the last.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Hashable, Sequence
from functools import cached_property
from typing import Any

from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEKubernetesAsyncHook
from asgiref.sync import sync_to_async

from tpu_rl.kube import objects as kube
from tpu_rl.kube import verdicts
from tpu_rl.kube.async_client import AsyncKube, KubeApiError, OnDemandKube
from tpu_rl.kube.shared_client import SharedClients, connection_key, shared_clients
from tpu_rl.rewards import capacity_loss, save_stop
from tpu_rl.rewards.cluster_view import ClusterView
from tpu_rl.rewards.event_files import EventFiles, file_epoch
from tpu_rl.rewards.held_log import HeldLog, Log
from tpu_rl.rewards.line_reader import take_step
from tpu_rl.rewards.pod_log import SETTLE_S, PodLogReader
from tpu_rl.rewards.position import SavedPosition
from tpu_rl.rewards.release import delete_now
from tpu_rl.watch import curves, health
from tpu_rl.watch.capacity_end import epoch
from tpu_rl.watch.core import BoardRead, PollDone, Quiet, ReportDue, Scalar, advance
from tpu_rl.watch.ends import CAPACITY_SUSPECTS, Result, WaitEnd, error_event
from tpu_rl.watch.rules import WatchRules
from tpu_rl.watch.state import FollowState

TAIL_LINES = 20
# the TensorBoard tags read: the watchdog's, then the RL page's curves (tpu_rl.watch.curves)
BOARD_READ = (*health.BOARD_TAGS, *(t for t in curves.CURVE_TAGS if t not in health.BOARD_TAGS))
TAIL_CHARS = 4000
# How long a stopping trigger may take to save its position: within the 10 s a stopping
# triggerer gives its runner before escalating to SIGTERM/SIGKILL (Airflow's
# jobs/triggerer_job_runner.py, TriggererJobRunner._execute: `kill(escalation_delay=10)`).
STOP_SAVE_S = 5.0


class LogFollower:
    """One poll at a time: read new log lines of the Job's pod, and judge the Job and backend.

    With `stream_log`, the log is one `follow=true` response pumped in the background across
    polls (the owner calls `close()` when done) and `news` is set when there is something to
    poll for; without, each poll GETs the lines since the last one. The Job, its pods and the
    backend are read through `cluster`: again only when its watches say they changed.
    """

    def __init__(
        self,
        *,
        cluster_url: str,
        ssl_ca_cert: str,
        namespace: str,
        job_name: str,
        deadline: float,
        gcp_conn_id: str = "google_cloud_default",
        impersonation_chain: str | Sequence[str] | None = None,
        use_dns_endpoint: bool = False,
        container_name: str | None = None,
        backend_jobset_name: str | None = None,
        pending_timeout: float = 1800.0,
        watch: WatchRules | dict[str, Any] | None = None,
        tensorboard_dir: str | None = None,
        tensorboard_every_s: float = 30.0,
        state: FollowState | None = None,
        log: Log | None = None,
        stream_log: bool = False,
        report_progress: bool = False,
    ) -> None:
        self.cluster_url = cluster_url
        self.ssl_ca_cert = ssl_ca_cert
        self.namespace = namespace
        self.job_name = job_name
        self.deadline = deadline
        self.gcp_conn_id = gcp_conn_id
        self.impersonation_chain = impersonation_chain
        self.use_dns_endpoint = use_dns_endpoint
        self.container_name = container_name
        self.backend_jobset_name = backend_jobset_name
        self.pending_timeout = pending_timeout
        # what stops training or says its progress (tpu_rl.watch.rules): the capacity's end,
        # the spend limit, the watchdog's rules, the progress report's cadence
        self.watch = watch if isinstance(watch, WatchRules) else WatchRules.from_dict(watch)
        # the trigger's: a progress event at its cadence (progress.report_due), for the run's
        # page and note while training runs; a poke or a one-off poll ends only when done
        self.report_progress = report_progress
        self.log = log or logging.getLogger(__name__)
        self.stream_log = stream_log
        # what the reader says of the lines it read: held until a saved position covers them
        self.held = HeldLog(self.log, hold=stream_log)
        self.reader = PodLogReader(
            connect=lambda: self.clients().lease(stream=True),
            namespace=namespace,
            container_name=container_name,
            state=state or FollowState(),
            log=self.held,
            stream_log=stream_log,
        )
        self._bytes_read = 0
        # the training health watchdog (tpu_rl.watch.health), armed with this attempt's rules
        self.state.health = health.armed(self.state.health, self.watch.health)
        # the run's TensorBoard event files, read for the watchdog's rules on their scalars at
        # most every `tensorboard_every_s` (tensorboardX flushes them every 120 s)
        self.event_files = (
            EventFiles(tensorboard_dir, gcp_conn_id, impersonation_chain, self.log)
            if tensorboard_dir
            else None
        )
        self.tensorboard_every_s = tensorboard_every_s
        self._board_read_at: float | None = None  # monotonic seconds of the last read
        self.position = SavedPosition(namespace, job_name, self.log)
        self.cluster = ClusterView(namespace, job_name, backend_jobset_name)
        self._finished = False  # a poll returned the event: the position is not saved past it

    @cached_property
    def hook(self) -> GKEKubernetesAsyncHook:
        return GKEKubernetesAsyncHook(
            cluster_url=self.cluster_url,
            ssl_ca_cert=self.ssl_ca_cert,
            gcp_conn_id=self.gcp_conn_id,
            impersonation_chain=self.impersonation_chain,
            use_dns_endpoint=self.use_dns_endpoint,
        )

    @property
    def connection(self) -> Hashable:
        """Who this follower connects as: the cluster and the credentials."""
        who = (self.cluster_url, self.ssl_ca_cert, self.use_dns_endpoint, self.gcp_conn_id)
        return connection_key(*who, self.impersonation_chain)

    def clients(self) -> SharedClients:
        """The API clients shared with the event loop's waits that connect as this one."""
        return shared_clients(self.connection, self.hook.get_conn)

    @property
    def state(self) -> FollowState:
        return self.reader.state

    @property
    def news(self) -> asyncio.Event:
        """Set when there is something to poll for: a result, a reward line, a stream end."""
        return self.reader.news

    @property
    def bytes_read(self) -> int:
        return self._bytes_read + self.reader.bytes_read

    async def close(self) -> None:
        """Close the log stream, if one is open, and remove the event files' local copies."""
        await self.reader.close()
        if self.event_files is not None:
            self.event_files.close()

    async def stop(self) -> None:
        """The trigger is stopped before its event (a triggerer restart): close the stream,
        then save the position through the last line consumed and say what was held of those
        lines, so a rebuilt trigger logs none of them again. Best effort, bounded: a position
        not saved is read again, and what was held of it is said by the rebuilt trigger."""
        finished = self._finished or self.found() is not None
        await self.reader.close()
        if finished or not self.stream_log:
            return
        with contextlib.suppress(Exception):
            async with asyncio.timeout(STOP_SAVE_S), self.clients().lease() as client:
                await self._save_and_tell(AsyncKube(client))

    async def _save_and_tell(self, api: AsyncKube) -> None:
        """Save the position, then say what was held of the lines it covers (those read
        during the save stay held for the next one)."""
        covered = self.held.mark()
        if await self.position.save(api, self.state):
            self.held.tell(covered)

    def found(self) -> Result | None:
        """The result the open stream has found, if any (no API call)."""
        return self.reader.found()

    async def settle(self) -> None:
        """Before the wait hands its state on (a progress report): let the log stream read on
        to the start of a second of the log, so the wait rebuilt from that state fetches again
        about a line, not the second of log read so far (PodLogReader.settle)."""
        await self.reader.settle(SETTLE_S)

    async def release_backend(self) -> None:
        """Delete the backend JobSet now that the wait is over: the TPUs are free the moment
        training ends. Best effort: stop_backend and cleanup delete it too."""
        if name := self.backend_jobset_name:
            path = kube.jobset_path(self.namespace, name)
            await delete_now(self.clients(), f"backend {name}", path, "TPUs free", self.log)

    async def stop_training(self) -> None:
        """Delete the training Job right after the last save its capacity allows: no step past
        it. Best effort: the resume, or cleanup, deletes it too."""
        path, what = kube.job_path(self.namespace, self.job_name), f"training Job {self.job_name}"
        await delete_now(self.clients(), what, path, "no step past the save", self.log)

    async def poll(self) -> Result | None:
        """One poll: an event payload when done (success or error), else None.

        Raises KubeApiError only for transient API errors (429, 5xx, no answer); other API
        errors become an `api_error` event. A 401 reconnects once with a fresh Google token.
        """
        result = await self._poll_once()
        if result is not None:  # the wait ends: no trigger reads these lines again
            self.held.tell()
            if result.get("status") != "running":  # a progress report: the wait goes on
                await self._read_last_scalars()
            if self.state.curves:  # the page's curves, for the wait's XCom
                result = {**result, "curves": self.state.curves}
        return result

    async def _read_last_scalars(self) -> None:
        """The curves' last steps when the wait ends (Tunix flushes its event file at close,
        before the Post line): read once more, past the read interval, for the curves only, the
        files of this attempt that were read before (named by their writer's start)."""
        started = [file_epoch(name) or 0 for name in self.state.event_offsets]
        if self.event_files is None or not started:
            return
        if (scalars := await self._read_board(self.event_files, min(started))) is not None:
            self.state.curves = curves.record(self.state.curves, scalars)  # the curves only

    async def _poll_once(self) -> Result | None:
        if (result := self.found()) is not None:
            return result
        try:
            return await self._connected_poll()
        except KubeApiError as error:
            if error.status != 401:
                return _api_failure(error)
        self.log.info("Kubernetes API answered 401; reconnecting with a fresh token")
        self.clients().renew()
        try:
            return await self._connected_poll()
        except KubeApiError as error:
            return _api_failure(error)

    async def _connected_poll(self) -> Result | None:
        """Poll over the shared client, leased only if the poll asks the API anything."""
        async with contextlib.AsyncExitStack() as connection:
            api = OnDemandKube(self.clients().lease, connection)
            try:
                result = await self._poll(api)
            except BaseException:
                self.cluster.forget()
                raise
            finally:
                self._bytes_read += api.bytes_read
            self._finished = result is not None  # before the connection's close can be cancelled
            return result

    async def _poll(self, api: AsyncKube) -> Result | None:
        if time.time() >= self.deadline:
            return await self._fail(
                api, WaitEnd.TIMEOUT, "no Post RL Training line before the timeout"
            )
        self.cluster.start_poll()
        if (job := await self.cluster.job(api)) is None:
            return error_event(
                WaitEnd.JOB_FAILED, f"Job {self.namespace}/{self.job_name} not found"
            )
        if (resumed := self.position.resume(job, self.state)) is not None:
            resumed.health = health.armed(resumed.health, self.watch.health)
            self.reader.state = resumed
        # The Job's watch and its pods' are two connections: the Job's success can be told
        # before its pod's end, so the pods are read again then and the log to its end (the
        # Post line may still be on its way), not `completed_without_result` at once.
        succeeded = verdicts.job_succeeded(job)
        pods = await self.cluster.pods(api, again=succeeded)
        if (result := await self._read_training(api, job, pods, succeeded)) is not None:
            return result
        pod = verdicts.current_pod(pods, self.state.pod_uid)
        if (result := await self._judge_cluster(api, job, pods, pod, succeeded)) is not None:
            return result
        if self.stream_log:
            await self._save_and_tell(api)  # after this poll's every change: one PATCH
        if self.report_progress and not succeeded:
            return take_step(self.state, ReportDue(self.watch.progress_every_s), self.held)
        return None

    async def _read_training(
        self, api: AsyncKube, job: dict[str, Any], pods: list[dict[str, Any]], succeeded: bool
    ) -> Result | None:
        """What training shows: the pod's new log lines, the event files' new scalars, the
        progress and spend, the save just finished; the event of the first that ends the wait."""
        pod = verdicts.current_pod(pods, self.state.pod_uid)
        read = await self.reader.follow(api, pod, pods, final=succeeded) if pod else None
        if read is not None:
            return read
        if not succeeded and (unhealthy := await self._read_event_files(job)) is not None:
            return unhealthy  # a fatal rule on the TensorBoard scalars: training is stopped
        watch = self.watch
        if (
            stop := take_step(self.state, PollDone(watch.total_steps, watch.spend), self.held)
        ) is not None:
            return stop  # the save just committed is the last the spend limit allows
        if watch.checkpoint_period and (stop := await self._judge_save(api)) is not None:
            return stop  # the save just finished is the last its capacity allows
        return None

    async def _judge_cluster(
        self,
        api: AsyncKube,
        job: dict[str, Any],
        pods: list[dict[str, Any]],
        pod: dict[str, Any] | None,
        succeeded: bool,
    ) -> Result | None:
        """What the cluster shows: the Job, its pod or the backend failed (the TPUs taken, or
        not), the pod runs silent past the stall rule, or nothing runs past pending_timeout."""
        failure = verdicts.job_failure(self.job_name, job, pods, pod)
        waiting = verdicts.job_waiting(self.job_name, job, pod)
        if failure is None and self.backend_jobset_name:
            failure, backend_waiting = await self._backend(api)
            waiting = waiting or backend_waiting
        if failure is not None:
            lost = await self._capacity_lost(api, failure, pods, pod)
            return lost or await self._fail(api, *failure, pod=pod)
        if not succeeded and (stalled := await self._check_stall(api, pod)) is not None:
            return stalled  # the pod runs on, silent: training is stopped
        return await self._check_pending(api, waiting, pod)

    async def _read_event_files(self, job: dict[str, Any]) -> Result | None:
        """Judge the TensorBoard scalars written since the last read (tpu_rl.watch.health.
        on_scalar) and keep the page's curves of them (tpu_rl.watch.curves, the watchdog on or
        off): the watchdog's event when a fatal rule fires. Only the event files this
        Job's pods started (named by their writer's start, event_files.file_epoch): an earlier
        attempt's, under the same run_name, are not this one's. Best effort: the log's rules
        go on when the files cannot be read."""
        now = time.monotonic()
        if self.event_files is None or health.fatal(self.state.health):
            return None
        if self._board_read_at is not None and now - self._board_read_at < self.tensorboard_every_s:
            return None
        self._board_read_at = now
        if (scalars := await self._read_board(self.event_files, _created_epoch(job))) is None:
            return None
        return take_step(self.state, BoardRead(tuple(scalars)), self.held)

    async def _read_board(self, files: EventFiles, since: float | None) -> list[Scalar] | None:
        """The event files' new scalars (of the files whose writer started at or after `since`),
        their offsets moved past them; None when they cannot be read now (the bucket unreadable,
        a file mid-replacement: the next read tries again)."""
        # blocking GCS calls off the event loop, as the google provider's async hooks run their
        # sync hook (common/hooks/base_google.py, GoogleBaseAsyncHook.get_sync_hook)
        read = sync_to_async(files.read, thread_sensitive=False)
        try:
            offsets, scalars = await read(self.state.event_offsets, since, BOARD_READ)
        except Exception as error:
            self.log.warning("TensorBoard event files not read: %s", error)
            return None
        self.state.event_offsets = offsets
        return scalars

    async def _check_stall(self, api: AsyncKube, pod: dict[str, Any] | None) -> Result | None:
        """The watchdog's stall event when the training pod runs but has logged no step line
        for longer than the stall rule allows (tpu_rl.watch.health.on_quiet), judged on the
        whole log: a silence an open stream has not caught up on (a rebuilt trigger's first
        polls, the lines logged while no trigger ran still on their way) is read to its end
        first, with a GET (a GET per poll has read it already), and its step lines judged; the
        event of a line read then (the Post line, a fatal rule's) comes first."""
        if pod is None or verdicts.phase(pod) != "Running":
            return None
        if not advance(self.state, Quiet(time.time()))[1]:  # asked only: no stall
            return None
        if self.stream_log and (result := await self.reader.catch_up(api, pod)) is not None:
            return result
        return take_step(self.state, Quiet(time.time()), self.held)

    async def _judge_save(self, api: AsyncKube) -> Result | None:
        _, pods = await self.cluster.backend(api) if self.backend_jobset_name else (None, [])
        w = self.watch
        args = (w.checkpoint_period, w.total_steps, pods, w.capacity_ends_at, self.log)
        return await save_stop.judge_save(api, self.state, *args)

    async def _backend(self, api: AsyncKube) -> tuple[verdicts.Failure | None, str | None]:
        name = self.backend_jobset_name or ""
        jobset, pods = await self.cluster.backend(api)
        verdict = verdicts.backend_verdict(name, jobset, pods, self.state.backend_pods_seen)
        state = self.state
        state.backend_pods_seen = state.backend_pods_seen or bool(pods)
        state.backend_created = (jobset or {}).get("metadata", {}).get("creationTimestamp")
        # kept: a JobSet restart or pod GC may remove the disrupted pods before the failure
        state.capacity_evidence = state.capacity_evidence or verdicts.capacity_evidence(pods)
        return verdict

    async def _capacity_lost(
        self,
        api: AsyncKube,
        failure: verdicts.Failure,
        pods: list[dict[str, Any]],
        pod: dict[str, Any] | None,
    ) -> Result | None:
        """The capacity_lost event when the cluster shows lost capacity; None: a real failure."""
        state = self.state
        if failure[0] not in CAPACITY_SUSPECTS:
            return None
        why = await capacity_loss.evidence(api, self.namespace, pods, self.backend_jobset_name)
        if (why := why or state.capacity_evidence) is None:
            return None
        result = await self._fail(api, WaitEnd.CAPACITY_LOST, f"{why}; {failure[1]}", pod=pod)
        return {**result, **state.attempt_facts()}

    async def _check_pending(
        self, api: AsyncKube, waiting: str | None, pod: dict[str, Any] | None
    ) -> Result | None:
        now = time.time()
        if waiting is None:
            self.state.pending_since = None
            return None
        if self.state.pending_since is None:
            self.state.pending_since = now
            self.log.info("Waiting: %s", waiting)
        if now - self.state.pending_since <= self.pending_timeout:
            return None
        events = await self.cluster.events(api, pod)
        message = f"still not running after {self.pending_timeout:.0f}s: {waiting}" + (
            f"; events: {events}" if events else ""
        )
        return await self._fail(api, WaitEnd.UNSCHEDULABLE, message, pod=pod)

    async def _fail(
        self, api: AsyncKube, reason: str, message: str, pod: dict[str, Any] | None = None
    ) -> Result:
        """An error event with the followed pod's last log lines (secrets masked)."""
        name = pod["metadata"]["name"] if pod else self.state.pod_name
        tail = ""
        if name:
            try:
                container = self.reader.container(pod) if pod else self.container_name
                tail = await api.tail_log(self.namespace, name, container, TAIL_LINES)
            except KubeApiError as error:
                tail = f"(log not available: {error})"
        if tail.strip():
            message += f"\nLast log lines of pod {name}:\n{tail.rstrip()[-TAIL_CHARS:]}"
        return error_event(reason, message)


def _created_epoch(obj: dict[str, Any]) -> float | None:
    """The object's creationTimestamp (RFC 3339, whole seconds) in epoch seconds."""
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    return epoch(stamp) if stamp else None


def _api_failure(error: KubeApiError) -> Result:
    """Re-raise a transient error for the caller's back-off; turn others into an event."""
    if error.transient:
        raise error
    return error_event(WaitEnd.API_ERROR, f"Kubernetes API error: {error}")
