"""One poll of the reward wait: read the training pod's new log lines, judge Job and backend.

The trigger keeps the log open as one `follow=true` stream read as it arrives and polls on
news; the reschedule-mode sensor polls once per poke, GETting the lines since the last.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEKubernetesAsyncHook

from tpu_rl.kube import objects as kube
from tpu_rl.kube import verdicts
from tpu_rl.kube.async_client import AsyncKube, KubeApiError
from tpu_rl.rewards import capacity_loss
from tpu_rl.rewards.follower import FollowState, Result
from tpu_rl.rewards.lines import redact
from tpu_rl.rewards.pod_log import PodLogReader

TAIL_LINES = 20
TAIL_CHARS = 4000
# The follower's position, saved on the training Job: a rebuilt trigger (triggerer restart,
# task retry) resumes there instead of reading and logging the whole log again.
POSITION_ANNOTATION = "tpu-rl.dev/reward-follow-position"


class LogFollower:
    """One poll at a time: read new log lines of the Job's pod, and judge the Job and backend.

    With `stream_log`, the log is one `follow=true` response pumped in the background across
    polls (the owner calls `close()` when done) and `news` is set when there is something to
    poll for; without, each poll GETs the lines since the last one.
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
        state: FollowState | None = None,
        log: logging.Logger | None = None,
        stream_log: bool = False,
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
        self.log = log or logging.getLogger(__name__)
        self.stream_log = stream_log
        self.reader = PodLogReader(
            hook=self.hook,
            namespace=namespace,
            container_name=container_name,
            state=state or FollowState(),
            log=self.log,
            stream_log=stream_log,
        )
        self._bytes_read = 0
        self._saved: str | None = None  # the position last saved on the Job
        self._saving = True  # off once the API refuses the Job annotation

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
        """Close the log stream, if one is open."""
        await self.reader.close()

    def found(self) -> Result | None:
        """The result the open stream has found, if any (no API call)."""
        return self.reader.found()

    async def release_backend(self) -> None:
        """Delete the backend JobSet now that the wait is over: the TPUs are free the moment
        training ends. Best effort: stop_backend and cleanup delete it too."""
        if not self.backend_jobset_name:
            return
        try:
            async with self.hook.get_conn() as client:
                status = await AsyncKube(client).delete(
                    kube.jobset_path(self.namespace, self.backend_jobset_name)
                )
        except Exception as error:  # the backstops still delete it
            self.log.warning("Could not delete backend %s now: %s", self.backend_jobset_name, error)
            return
        outcome = "deleted: its TPUs are free" if status < 300 else "was already gone"
        self.log.info("Backend %s %s.", self.backend_jobset_name, outcome)

    async def poll(self) -> Result | None:
        """One poll: an event payload when done (success or error), else None.

        Raises KubeApiError only for transient API errors (429, 5xx, no answer); other API
        errors become an `api_error` event. A 401 reconnects once with a fresh Google token.
        """
        if (result := self.found()) is not None:
            return result
        try:
            return await self._connected_poll()
        except KubeApiError as error:
            if error.status != 401:
                return _api_failure(error)
        self.log.info("Kubernetes API answered 401; reconnecting with a fresh token")
        try:
            return await self._connected_poll()
        except KubeApiError as error:
            return _api_failure(error)

    async def _connected_poll(self) -> Result | None:
        """Poll over a new connection: get_conn fetches a fresh Google token each time."""
        async with self.hook.get_conn() as client:
            api = AsyncKube(client)
            try:
                return await self._poll(api)
            finally:
                self._bytes_read += api.bytes_read

    async def _poll(self, api: AsyncKube) -> Result | None:
        if time.time() >= self.deadline:
            return await self._fail(api, "timeout", "no Post RL Training line before the timeout")
        job = await api.get_optional(kube.job_path(self.namespace, self.job_name))
        if job is None:
            return _error("job_failed", f"Job {self.namespace}/{self.job_name} not found")
        self._resume_from(job)
        pods = await api.list_items(kube.pods_path(self.namespace), f"job-name={self.job_name}")
        pod = verdicts.current_pod(pods, self.state.pod_uid)
        if pod is not None:
            if (result := await self.reader.follow(api, pod, pods)) is not None:
                return result
            pod = verdicts.current_pod(pods, self.state.pod_uid)
        await self._save_position(api)
        failure = verdicts.job_failure(self.job_name, job, pods, pod)
        waiting = verdicts.job_waiting(self.job_name, job, pod)
        if failure is None and self.backend_jobset_name:
            failure, backend_waiting = await self._backend(api)
            waiting = waiting or backend_waiting
        if failure is not None:
            lost = await self._capacity_lost(api, failure, pods, pod)
            return lost or await self._fail(api, *failure, pod=pod)
        return await self._check_pending(api, waiting, pod)

    # -- the saved position ------------------------------------------------------------------

    def _resume_from(self, job: dict[str, Any]) -> None:
        """Take the position saved on the Job when this follower starts from nothing."""
        saved = ((job.get("metadata") or {}).get("annotations") or {}).get(POSITION_ANNOTATION)
        if not saved or self.state.pod_uid is not None or self._saved is not None:
            return
        self.reader.state, self._saved = FollowState.from_dict(json.loads(saved)), saved
        self.log.info("Resuming the log after %s (position saved on the Job)", self.state.last_time)

    async def _save_position(self, api: AsyncKube) -> None:
        """Save the position on the Job when it moved: after each logged reward line, so a
        rebuilt trigger logs none twice and reads again at most one poll's worth of log."""
        if not (self.stream_log and self._saving) or self.state.pod_uid is None:
            return
        position = json.dumps(self.state.as_dict(), sort_keys=True)
        if position == self._saved:
            return
        body = {"metadata": {"annotations": {POSITION_ANNOTATION: position}}}
        try:
            await api.merge_patch(kube.job_path(self.namespace, self.job_name), body)
        except KubeApiError as error:  # a restart then reads from the deferral's position
            if not error.transient:
                self.log.warning("Cannot save the log position on the Job (%s): not saving", error)
                self._saving = False
            return
        self._saved = position

    async def _backend(self, api: AsyncKube) -> tuple[verdicts.Failure | None, str | None]:
        name = self.backend_jobset_name or ""
        jobset = await api.get_optional(kube.jobset_path(self.namespace, name))
        pods: list[dict[str, Any]] = []
        if jobset is not None:
            selector = f"{kube.JOBSET_NAME_LABEL}={name}"
            pods = await api.list_items(kube.pods_path(self.namespace), selector)
        verdict = verdicts.backend_verdict(name, jobset, pods, self.state.backend_pods_seen)
        state = self.state
        state.backend_pods_seen = state.backend_pods_seen or bool(pods)
        state.backend_created = (jobset or {}).get("metadata", {}).get("creationTimestamp")
        # kept: a JobSet restart or pod GC may remove the disrupted pods before the failure
        state.capacity_evidence = state.capacity_evidence or verdicts.capacity_evidence(pods)
        return verdict

    async def _capacity_lost(
        self, api: AsyncKube, failure: verdicts.Failure, pods: list[dict], pod: dict | None
    ) -> Result | None:
        """The capacity_lost event when the cluster shows lost capacity; None: a real failure."""
        state = self.state
        if failure[0] not in capacity_loss.SUSPECTS:
            return None
        why = await capacity_loss.evidence(api, self.namespace, pods, self.backend_jobset_name)
        if (why := why or state.capacity_evidence) is None:
            return None
        result = await self._fail(api, capacity_loss.REASON, f"{why}; {failure[1]}", pod=pod)
        return {**result, "pre": state.pre, "reached_step": state.reached_step,
                "backend_created": state.backend_created}  # fmt: skip

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
        events = await self._events(api, pod)
        message = f"still not running after {self.pending_timeout:.0f}s: {waiting}" + (
            f"; events: {events}" if events else ""
        )
        return await self._fail(api, "unschedulable", message, pod=pod)

    async def _events(self, api: AsyncKube, pod: dict[str, Any] | None) -> str:
        """The latest few event messages about the pod (or the Job when there is no pod)."""
        name = pod["metadata"]["name"] if pod else self.job_name
        query = [("fieldSelector", f"involvedObject.name={name}")]
        try:
            body = await api.get_json(f"{kube.ns_path(self.namespace)}/events", query)
        except KubeApiError as error:
            return f"(events not available: {error})"
        items = sorted(
            body.get("items") or [],
            key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "",
        )
        return "; ".join(
            f"{e.get('reason', '')}: {e.get('message', '')}".strip(": ") for e in items[-3:]
        )

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
        return _error(reason, message)


def _api_failure(error: KubeApiError) -> Result:
    """Re-raise a transient error for the caller's back-off; turn others into an event."""
    if error.transient:
        raise error
    return _error("api_error", f"Kubernetes API error: {error}")


def _error(reason: str, message: str) -> Result:
    return {"status": "error", "reason": reason, "message": redact(message)}
