"""Follow the training Job's pod log for MaxText's reward lines: the poll logic and its trigger.

`LogFollower.poll()` is one poll (the trigger loops it; the reschedule-mode sensor runs it once
per poke). All progress lives in `FollowState`, a JSON-safe dict, so a rebuilt trigger or the
next poke continues from the last line read without missing or repeating one. The trigger keeps
the log open as one `follow=true` stream across its polls; a poke GETs the lines since the last.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import hashlib
import json
import logging
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any
from urllib.parse import quote

import aiohttp
from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEKubernetesAsyncHook
from airflow.triggers.base import BaseTrigger, TriggerEvent
from kubernetes_asyncio.client import ApiClient

from tpu_rl.rewards import LineAssembler, parse_line, redact, split_timestamp

JOBSET_API = "/apis/jobset.x-k8s.io/v1alpha2"
TAIL_LINES = 20
TAIL_CHARS = 4000
REQUEST_TIMEOUT_S = 60
# An open log stream: no total limit; a connection silent this long is taken as broken.
STREAM_TIMEOUT = aiohttp.ClientTimeout(
    total=None, connect=REQUEST_TIMEOUT_S, sock_read=REQUEST_TIMEOUT_S
)
STREAM_WAIT_S = 0.2  # longest a poll waits for news on an open log stream
BACKOFF_CAP_S = 60.0
# On the training Job: "<timestamp> <n>", the last progress line logged and how many were logged
# at that timestamp, so a trigger rebuilt from its deferral kwargs (a triggerer killed and
# restarted) does not log those lines again.
LOGGED_UNTIL_ANNOTATION = "tpu-rl.dev/rewards-logged-until"
_FINISHED = ("Succeeded", "Failed")
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


class KubeApiError(Exception):
    """A Kubernetes API answer other than 2xx (status 0: the request did not get an answer)."""

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        """Worth retrying after a back-off: throttling, server errors, no answer."""
        return self.status in (0, 429) or self.status >= 500


@dataclass
class FollowState:
    """Where the follower is: the pod and container instance, and the last line consumed."""

    pod_uid: str | None = None
    pod_name: str | None = None
    restart_count: int | None = None
    container_id: str | None = None
    last_time: str | None = None  # RFC3339Nano of the last consumed line
    seen_at_last_time: list[str] = field(default_factory=list)  # hashes of lines at last_time
    pre: dict[str, Any] | None = None
    pending_since: float | None = None  # epoch seconds something has been waiting to run
    backend_pods_seen: bool = False

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> FollowState:
        return cls(**(data or {}))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def start_container(self, restart_count: int | None, container_id: str | None) -> None:
        """Read a new container instance's log from its beginning."""
        self.restart_count, self.container_id = restart_count, container_id
        self.last_time, self.seen_at_last_time = None, []


def _time_key(stamp: str) -> tuple[int, int]:
    """Sortable (epoch second, nanosecond) of an RFC3339(Nano) timestamp."""
    match = _STAMP.match(stamp)
    if match is None:
        raise ValueError(f"not an RFC3339 timestamp: {stamp!r}")
    whole, fraction, zone = match.groups()
    seconds = datetime.fromisoformat(whole + ("+00:00" if zone == "Z" else zone))
    return int(seconds.timestamp()), int((fraction or "0")[:9].ljust(9, "0"))


def _since_time(stamp: str) -> str:
    """The whole second a timestamp falls in, as `sinceTime` (servers truncate to seconds)."""
    second = _time_key(stamp)[0]
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _line_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _true_conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return {c.get("type", ""): c for c in conditions if c.get("status") == "True"}


def _condition_text(condition: dict[str, Any]) -> str:
    parts = [condition.get("reason") or "", condition.get("message") or ""]
    return ": ".join(p for p in parts if p) or condition.get("type", "")


def _recency(pod: dict[str, Any]) -> tuple[bool, str, str]:
    """Sort key for the newest pod: active before finished, then creation time, then name."""
    meta = pod.get("metadata") or {}
    return _phase(pod) not in _FINISHED, meta.get("creationTimestamp") or "", meta.get("name") or ""


def _phase(pod: dict[str, Any]) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def _pod_waiting_reason(pod: dict[str, Any]) -> str:
    """Why a pod is not running: PodScheduled=False, a waiting container, or its phase."""
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return _condition_text(condition)
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting")
        if waiting:
            return _condition_text({"type": "Waiting", **waiting})
    return f"phase {_phase(pod)}"


@contextlib.contextmanager
def _answered(path: str) -> Iterator[None]:
    """Turn a request that got no answer (timeout, connection, TLS) into status 0."""
    try:
        yield
    except (TimeoutError, aiohttp.ClientError, OSError) as error:
        raise KubeApiError(0, f"GET {path}: {type(error).__name__}: {error}") from error


class _Kube:
    """Raw JSON and log access through a kubernetes_asyncio ApiClient (auth, TLS, host)."""

    def __init__(self, client: ApiClient) -> None:
        self._client = client
        self.bytes_read = 0

    async def open(
        self,
        path: str,
        query: list[tuple[str, str]],
        timeout: float | aiohttp.ClientTimeout = REQUEST_TIMEOUT_S,
    ) -> aiohttp.ClientResponse:
        """GET: the 2xx response with its body unread (the caller closes it)."""
        with _answered(path):
            response = await self._client.call_api(
                path,
                "GET",
                query_params=query,
                header_params={"Accept": "application/json, */*"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout,
            )
            if 200 <= response.status < 300:
                return response
            async with response:
                body = await response.read()
        self.bytes_read += len(body)
        raise _api_error(path, response.status, response.headers.get("Retry-After"), body)

    async def _get(self, path: str, query: list[tuple[str, str]]) -> bytes:
        response = await self.open(path, query)
        with _answered(path):
            async with response:
                body = await response.read()
        self.bytes_read += len(body)
        return body

    async def get_json(self, path: str, query: list[tuple[str, str]] | None = None) -> Any:
        return json.loads(await self._get(path, query or []))

    async def get_optional(self, path: str) -> dict[str, Any] | None:
        """GET an object; None if it does not exist."""
        try:
            return await self.get_json(path)
        except KubeApiError as error:
            if error.status == 404:
                return None
            raise

    async def get_text(self, path: str, query: list[tuple[str, str]]) -> str:
        return (await self._get(path, query)).decode("utf-8", errors="replace")

    async def annotate(self, path: str, key: str, value: str) -> None:
        """Merge-patch one annotation onto an object."""
        with _answered(path):
            response = await self._client.call_api(
                path,
                "PATCH",
                body={"metadata": {"annotations": {key: value}}},
                header_params={"Content-Type": "application/merge-patch+json"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT_S,
            )
            async with response:
                body = await response.read()
        if not 200 <= response.status < 300:
            raise _api_error(path, response.status, None, body)


def _api_error(path: str, status: int, retry_header: str | None, body: bytes) -> KubeApiError:
    message = body.decode("utf-8", errors="replace")[:500]
    retry_after: float | None = None
    try:
        status_obj = json.loads(body)
        message = status_obj.get("message") or message
        retry_after = (status_obj.get("details") or {}).get("retryAfterSeconds")
    except (ValueError, AttributeError):
        pass
    if retry_header and retry_header.strip().isdigit():
        retry_after = float(retry_header)
    return KubeApiError(status, f"GET {path}: {message}", retry_after)


class _LogStream:
    """A `follow=true` log response kept open across polls, and the partial line it ends in."""

    def __init__(
        self,
        instance: tuple[Any, ...],
        resent: Counter[str],
        connection: contextlib.AsyncExitStack,
        response: aiohttp.ClientResponse,
    ) -> None:
        self.instance = instance  # (pod uid, container, restart count, container id)
        self.resent = resent  # consumed lines at the last timestamp it sends again (by hash)
        self.ended = False
        self._connection = connection
        self._response = response
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._lines = LineAssembler()

    @classmethod
    async def open(
        cls,
        hook: GKEKubernetesAsyncHook,
        path: str,
        query: list[tuple[str, str]],
        instance: tuple[Any, ...],
        resent: Counter[str],
    ) -> _LogStream:
        """Send the GET over a connection of its own, which outlives the poll that opens it."""
        connection = contextlib.AsyncExitStack()
        try:
            client = await connection.enter_async_context(hook.get_conn())
            response = await _Kube(client).open(path, query, STREAM_TIMEOUT)
        except BaseException:
            await connection.aclose()
            raise
        connection.callback(response.close)
        return cls(instance, resent, connection, response)

    async def read(self, *, to_end: bool) -> tuple[list[str], int]:
        """The complete lines that have arrived, and the bytes read.

        Waits up to STREAM_WAIT_S for news; with `to_end` (the container has terminated, so
        the server ends the stream) reads to the end and flushes the partial last line.
        """
        data = await self._receive(REQUEST_TIMEOUT_S if to_end else STREAM_WAIT_S, to_end)
        final = to_end and self.ended
        lines = self._lines.feed(self._decoder.decode(data, final=final))
        if final and (tail := self._lines.flush()):
            lines.append(tail)
        return lines, len(data)

    async def _receive(self, wait: float, to_end: bool) -> bytes:
        """The buffered bytes, else the first to arrive within `wait` s (all, with `to_end`)."""
        data = b""
        try:
            async with asyncio.timeout(wait):
                while chunk := await self._response.content.readany():
                    data += chunk
                    if not to_end:
                        return data
            self.ended = True
        except aiohttp.ClientError:  # the connection broke, or stayed silent past sock_read
            self.ended = True
        except TimeoutError:  # no (more) news within `wait`
            pass
        return data

    async def close(self) -> None:
        await self._connection.aclose()


class LogFollower:
    """One poll at a time: read new log lines of the Job's pod, and judge the Job and backend.

    With `stream_log`, the pod's log is one `follow=true` response kept open across polls (the
    owner calls `close()` when done); without, each poll GETs the lines since the last one,
    which suits one poll per process (the reschedule-mode sensor).
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
        self.state = state or FollowState()
        self.log = log or logging.getLogger(__name__)
        self.stream_log = stream_log
        self.bytes_read = 0
        self._stream: _LogStream | None = None
        self.logged_until: str | None = None  # stamp of the last progress line logged
        self._logged_at_last = 0  # progress lines logged at that stamp
        self._skip_at_last = 0  # of those, how many this follower has yet to read again
        self._unrecorded = False  # newer than the Job's annotation

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
    def _ns_path(self) -> str:
        return f"/api/v1/namespaces/{quote(self.namespace, safe='')}"

    def _log_path(self, pod_name: str) -> str:
        return f"{self._ns_path}/pods/{quote(pod_name, safe='')}/log"

    async def close(self) -> None:
        """Close the log stream, if one is open."""
        if self._stream is not None:
            stream, self._stream = self._stream, None
            await stream.close()

    async def release_backend(self) -> None:
        """Delete the backend JobSet now that the wait is over: the TPUs are free the moment
        training ends, not when Airflow next runs a task. Best effort: the sensor and cleanup
        delete it too, so a failure here is only logged."""
        if not self.backend_jobset_name:
            return
        body = {"propagationPolicy": "Foreground"}
        try:
            async with self.hook.get_conn() as client:
                response = await client.call_api(
                    self._jobset_path,
                    "DELETE",
                    body=body,
                    header_params={"Content-Type": "application/json"},
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                    _request_timeout=REQUEST_TIMEOUT_S,
                )
                async with response:
                    status = response.status
        except Exception as error:  # the backstops still delete it
            self.log.warning("Could not delete backend %s now: %s", self.backend_jobset_name, error)
            return
        outcome = {404: "was already gone"}.get(status, f"delete answered HTTP {status}")
        if 200 <= status < 300:
            outcome = "deleted: its TPUs are free"
        self.log.info("Backend %s %s.", self.backend_jobset_name, outcome)

    async def poll(self) -> dict[str, Any] | None:
        """One poll: an event payload when done (success or error), else None.

        Raises KubeApiError only for transient API errors (429, 5xx, no answer); other API
        errors become an `api_error` event. A 401 reconnects once with a fresh Google token.
        """
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

    async def _connected_poll(self) -> dict[str, Any] | None:
        """Poll over a new connection: get_conn fetches a fresh Google token each time."""
        async with self.hook.get_conn() as client:
            kube = _Kube(client)
            try:
                return await self._poll(kube)
            finally:
                self.bytes_read += kube.bytes_read

    async def _poll(self, kube: _Kube) -> dict[str, Any] | None:
        if time.time() >= self.deadline:
            return await self._fail(kube, "timeout", "no Post RL Training line before the timeout")
        job = await kube.get_optional(
            f"/apis/batch/v1/namespaces/{quote(self.namespace, safe='')}/jobs/"
            f"{quote(self.job_name, safe='')}"
        )
        if job is None:
            return _error("job_failed", f"Job {self.namespace}/{self.job_name} not found")
        self._logged_until_from(job)
        pods = await self._list_pods(kube, f"job-name={self.job_name}")
        pod = self._current_pod(pods)
        if pod is not None:
            result = await self._follow(kube, pod, pods)
            await self._record_logged_until(kube)
            if result is not None:
                return result
            pod = self._current_pod(pods)
        failure = self._job_failure(job, pods, pod)
        waiting = self._job_waiting(job, pod)
        if failure is None and self.backend_jobset_name:
            failure, backend_waiting = await self._backend(kube)
            waiting = waiting or backend_waiting
        if failure is not None:
            return await self._fail(kube, *failure, pod=pod)
        return await self._check_pending(kube, waiting, pod)

    async def _list_pods(self, kube: _Kube, selector: str) -> list[dict[str, Any]]:
        body = await kube.get_json(f"{self._ns_path}/pods", [("labelSelector", selector)])
        return body.get("items") or []

    # -- the log --------------------------------------------------------------------------

    def _current_pod(self, pods: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The pod being followed, or the newest one when it is gone."""
        for pod in pods:
            if pod["metadata"].get("uid") == self.state.pod_uid:
                return pod
        return max(pods, key=_recency) if pods else None

    async def _follow(
        self, kube: _Kube, pod: dict[str, Any], pods: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """Read the followed pod's new lines; move on to a newer pod once it has finished."""
        result = await self._read_pod(kube, pod)
        newest = max(pods, key=_recency)
        if result is None and _phase(pod) in _FINISHED and newest is not pod:
            result = await self._read_pod(kube, newest)
        return result

    async def _read_pod(self, kube: _Kube, pod: dict[str, Any]) -> dict[str, Any] | None:
        meta = pod["metadata"]
        if meta.get("uid") != self.state.pod_uid:
            if self.state.pod_uid is not None:
                self.log.info(
                    "Pod %s was replaced by %s; reading its log from the start",
                    self.state.pod_name,
                    meta.get("name"),
                )
            self.state.pod_uid, self.state.pod_name = meta.get("uid"), meta.get("name")
            self.state.start_container(None, None)
        container = self._container(pod)
        status = next(
            (
                s
                for s in (pod.get("status") or {}).get("containerStatuses") or []
                if s.get("name") == container
            ),
            {},
        )
        restarts, container_id = status.get("restartCount"), status.get("containerID")
        if self._restarted(restarts, container_id):
            self.log.info(
                "Container %s of pod %s restarted (restartCount %s); reading its new log",
                container,
                meta.get("name"),
                restarts,
            )
            if restarts == (self.state.restart_count or 0) + 1 and self.state.last_time:
                result = await self._read_log(kube, pod, container, previous=True, final=True)
                if result is not None:
                    return result
            self.state.start_container(restarts, container_id)
        elif restarts is not None:
            self.state.restart_count, self.state.container_id = restarts, container_id
        state = status.get("state") or {}
        if "waiting" in state or (not state and _phase(pod) == "Pending"):
            return None
        return await self._read_log(kube, pod, container, final="terminated" in state)

    def _restarted(self, restarts: int | None, container_id: str | None) -> bool:
        known = self.state.restart_count
        if known is None or restarts is None:
            return False
        return restarts != known or bool(
            container_id and self.state.container_id and container_id != self.state.container_id
        )

    def _container(self, pod: dict[str, Any]) -> str:
        if self.container_name:
            return self.container_name
        names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        if len(names) != 1:
            raise KubeApiError(
                400, f"pod {pod['metadata'].get('name')} has containers {names}: set container_name"
            )
        return names[0]

    async def _read_log(
        self,
        kube: _Kube,
        pod: dict[str, Any],
        container: str,
        *,
        previous: bool = False,
        final: bool = False,
    ) -> dict[str, Any] | None:
        """Read lines from the last position's second on and consume the new ones.

        A trailing partial line is left for the next read (which starts at or before it),
        unless the container has ended (`final`).
        """
        query = [("container", container), ("timestamps", "true")]
        if previous:
            query.append(("previous", "true"))
        if self.state.last_time:
            query.append(("sinceTime", _since_time(self.state.last_time)))
        path = self._log_path(pod["metadata"]["name"])
        try:
            if self.stream_log and not previous:
                return await self._read_stream(kube, path, query, container, final)
            lines = await self._get_lines(kube, path, query, final)
        except KubeApiError as error:
            if error.status == 400:  # container not started yet, or no previous instance
                self.log.debug("Log not readable yet: %s", error)
                return None
            raise
        return self._consume(lines, Counter(self.state.seen_at_last_time))

    async def _get_lines(
        self, kube: _Kube, path: str, query: list[tuple[str, str]], final: bool
    ) -> list[str]:
        """One GET of the log's lines."""
        assembler = LineAssembler()
        lines = assembler.feed(await kube.get_text(path, query))
        if final and (tail := assembler.flush()):
            lines.append(tail)
        return lines

    async def _read_stream(
        self, kube: _Kube, path: str, query: list[tuple[str, str]], container: str, final: bool
    ) -> dict[str, Any] | None:
        """Consume the lines that arrived on this container instance's stream (opened if need be).

        A stream that ended (container ended, server closed, network error) is closed, to be
        reopened by the next poll from the last line's second.
        """
        state = self.state
        instance = (state.pod_uid, container, state.restart_count, state.container_id)
        if self._stream is None or self._stream.instance != instance:
            await self.close()
            follow = [*query, ("follow", "true")]
            resent = Counter(state.seen_at_last_time)
            self._stream = await _LogStream.open(self.hook, path, follow, instance, resent)
        stream = self._stream
        lines, size = await stream.read(to_end=final)
        kube.bytes_read += size
        if stream.ended:
            await self.close()
        return self._consume(lines, stream.resent)

    def _consume(self, lines: list[str], resent: Counter[str]) -> dict[str, Any] | None:
        """Skip lines already consumed: before the last timestamp, or at it and in `resent`.

        `resent` counts (by hash) the consumed lines at the last timestamp that the read sends
        again, as one from `sinceTime` does; updated in place, so a stream's chunks share one.
        """
        state = self.state
        last = _time_key(state.last_time) if state.last_time else None
        for line in lines:
            stamp, text = split_timestamp(line)
            if stamp is None:  # the tail of a line that began before sinceTime: seen already
                continue
            key, digest = _time_key(stamp), _line_hash(text)
            if last is not None and key < last:
                continue
            if key == last:
                if resent[digest] > 0:
                    resent[digest] -= 1
                    continue
                state.seen_at_last_time.append(digest)
            else:
                last = key
                resent.clear()
                state.last_time, state.seen_at_last_time = stamp, [digest]
            if (result := self._on_line(stamp, text)) is not None:
                return result
        return None

    def _logged_until_from(self, job: dict[str, Any]) -> None:
        """Take the Job's mark of what an earlier trigger already logged, if it is newer."""
        annotations = (job.get("metadata") or {}).get("annotations") or {}
        stamp, _, count = (annotations.get(LOGGED_UNTIL_ANNOTATION) or "").partition(" ")
        if not _STAMP.match(stamp) or not count.isdigit():
            return
        if self.logged_until is None or _time_key(stamp) > _time_key(self.logged_until):
            self.logged_until = stamp
            self._logged_at_last = self._skip_at_last = int(count)

    async def _record_logged_until(self, kube: _Kube) -> None:
        """Best effort: a failed mark only means a restarted trigger logs a line again."""
        if not self._unrecorded or self.logged_until is None:
            return
        path = (
            f"/apis/batch/v1/namespaces/{quote(self.namespace, safe='')}/jobs/"
            f"{quote(self.job_name, safe='')}"
        )
        try:
            mark = f"{self.logged_until} {self._logged_at_last}"
            await kube.annotate(path, LOGGED_UNTIL_ANNOTATION, mark)
        except (KubeApiError, aiohttp.ClientError) as error:
            self.log.debug("Could not mark the logged lines on %s: %s", self.job_name, error)
            return
        self._unrecorded = False

    def _first_time_logged(self, stamp: str) -> bool:
        """Whether a progress line at `stamp` is new to the Airflow log (and mark it logged)."""
        last = _time_key(self.logged_until) if self.logged_until else None
        key = _time_key(stamp)
        if last is not None and key < last:
            return False
        if key == last and self._skip_at_last:
            self._skip_at_last -= 1
            return False
        if key == last:
            self._logged_at_last += 1
        else:
            self.logged_until, self._logged_at_last, self._skip_at_last = stamp, 1, 0
        self._unrecorded = True
        return True

    def _on_line(self, stamp: str, text: str) -> dict[str, Any] | None:
        parsed = parse_line(text)
        if parsed is None:
            return None
        metrics = parsed.metrics.as_dict()
        if parsed.kind != "post" and not self._first_time_logged(stamp):
            if parsed.kind == "pre":
                self.state.pre = metrics
            return None
        if parsed.kind == "intermediate":
            self.log.info(
                "Intermediate Eval step=%s mean_reward=%s accuracy=%s%%",
                parsed.step,
                metrics["mean_reward"],
                metrics["accuracy"],
            )
            return None
        if parsed.kind == "pre":
            self.log.info("Pre RL Training: %s", metrics)
            self.state.pre = metrics
            return None
        self.log.info("Post RL Training: %s", metrics)
        return {"status": "success", "pre": self.state.pre, "post": metrics, "post_time": stamp}

    # -- judging the Job and the backend ---------------------------------------------------

    def _job_failure(
        self, job: dict[str, Any], pods: list[dict[str, Any]], pod: dict[str, Any] | None
    ) -> tuple[str, str] | None:
        conditions = _true_conditions(job)
        if failed := conditions.get("Failed"):
            return "job_failed", f"Job {self.job_name} failed: {_condition_text(failed)}"
        if "Complete" in conditions or "SuccessCriteriaMet" in conditions:
            return (
                "completed_without_result",
                f"Job {self.job_name} completed without a 'Post RL Training' line "
                "(num_test_batches=0, or the log was cut)",
            )
        if pod is None or not self._pod_failed(pod):
            return None
        backoff_limit = (job.get("spec") or {}).get("backoffLimit", 6)
        failed_pods = sum(1 for p in pods if _phase(p) == "Failed")
        failures = max(failed_pods, (job.get("status") or {}).get("failed") or 0)
        if failures <= backoff_limit:
            return None  # the Job controller will start a replacement pod
        return "pod_failed", f"pod {pod['metadata'].get('name')} {self._exit_text(pod)}"

    def _pod_failed(self, pod: dict[str, Any]) -> bool:
        if _phase(pod) == "Failed":
            return True
        if (pod.get("spec") or {}).get("restartPolicy") != "Never":
            return False
        return any(
            ((s.get("state") or {}).get("terminated") or {}).get("exitCode", 0) != 0
            for s in (pod.get("status") or {}).get("containerStatuses") or []
        )

    @staticmethod
    def _exit_text(pod: dict[str, Any]) -> str:
        status = pod.get("status") or {}
        for container in status.get("containerStatuses") or []:
            ended = (container.get("state") or {}).get("terminated") or {}
            if ended.get("exitCode"):
                return f"container {container.get('name')} exited with code {ended['exitCode']}" + (
                    f" ({ended['reason']})" if ended.get("reason") else ""
                )
        return f"failed: {status.get('reason') or ''} {status.get('message') or ''}".strip()

    @property
    def _jobset_path(self) -> str:
        return (
            f"{JOBSET_API}/namespaces/{quote(self.namespace, safe='')}/jobsets/"
            f"{quote(self.backend_jobset_name or '', safe='')}"
        )

    async def _backend(self, kube: _Kube) -> tuple[tuple[str, str] | None, str | None]:
        """The backend JobSet's (failure, waiting reason)."""
        name = self.backend_jobset_name
        jobset = await kube.get_optional(self._jobset_path)
        if jobset is None:
            return ("backend_failed", f"backend JobSet {name} not found (deleted?)"), None
        conditions = _true_conditions(jobset)
        for kind in ("Failed", "Completed"):
            if condition := conditions.get(kind):
                text = f"backend JobSet {name} {kind}: {_condition_text(condition)}"
                return ("backend_failed", text), None
        pods = await self._list_pods(kube, f"jobset.sigs.k8s.io/jobset-name={name}")
        if not pods and self.state.backend_pods_seen:
            return ("backend_failed", f"backend JobSet {name} has lost all its pods"), None
        self.state.backend_pods_seen = self.state.backend_pods_seen or bool(pods)
        for pod in pods:
            if _phase(pod) == "Failed":
                text = f"backend pod {pod['metadata'].get('name')} {self._exit_text(pod)}"
                return ("backend_failed", text), None
        if (jobset.get("spec") or {}).get("suspend"):
            return None, f"backend JobSet {name} is suspended (not admitted by Kueue)"
        if not pods:
            return None, f"backend JobSet {name} has no pods yet"
        for pod in pods:
            if _phase(pod) == "Pending":
                name = pod["metadata"].get("name")
                return None, f"backend pod {name}: {_pod_waiting_reason(pod)}"
        return None, None

    def _job_waiting(self, job: dict[str, Any], pod: dict[str, Any] | None) -> str | None:
        if (job.get("spec") or {}).get("suspend"):
            return f"Job {self.job_name} is suspended (not admitted by Kueue)"
        if pod is None:
            return f"Job {self.job_name} has no pods yet"
        if _phase(pod) == "Pending":
            return f"pod {pod['metadata'].get('name')}: {_pod_waiting_reason(pod)}"
        return None

    async def _check_pending(
        self, kube: _Kube, waiting: str | None, pod: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        now = time.time()
        if waiting is None:
            self.state.pending_since = None
            return None
        if self.state.pending_since is None:
            self.state.pending_since = now
            self.log.info("Waiting: %s", waiting)
        if now - self.state.pending_since <= self.pending_timeout:
            return None
        events = await self._events(kube, pod)
        message = f"still not running after {self.pending_timeout:.0f}s: {waiting}" + (
            f"; events: {events}" if events else ""
        )
        return await self._fail(kube, "unschedulable", message, pod=pod)

    async def _events(self, kube: _Kube, pod: dict[str, Any] | None) -> str:
        """The latest few event messages about the pod (or the Job when there is no pod)."""
        name = pod["metadata"]["name"] if pod else self.job_name
        query = [("fieldSelector", f"involvedObject.name={name}")]
        try:
            body = await kube.get_json(f"{self._ns_path}/events", query)
        except KubeApiError as error:
            return f"(events not available: {error})"
        items = sorted(
            body.get("items") or [],
            key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "",
        )
        return "; ".join(
            f"{e.get('reason', '')}: {e.get('message', '')}".strip(": ") for e in items[-3:]
        )

    # -- errors -----------------------------------------------------------------------------

    async def _fail(
        self, kube: _Kube, reason: str, message: str, pod: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """An error event with the followed pod's last log lines (secrets masked)."""
        name = pod["metadata"]["name"] if pod else self.state.pod_name
        tail = ""
        if name:
            try:
                container = self._container(pod) if pod else self.container_name
                query = [("tailLines", str(TAIL_LINES))]
                if container:
                    query.append(("container", container))
                tail = await kube.get_text(self._log_path(name), query)
            except KubeApiError as error:
                tail = f"(log not available: {error})"
        if tail.strip():
            message += f"\nLast log lines of pod {name}:\n{tail.rstrip()[-TAIL_CHARS:]}"
        return _error(reason, message)


def _api_failure(error: KubeApiError) -> dict[str, Any]:
    """Re-raise a transient error for the caller's back-off; turn others into an event."""
    if error.transient:
        raise error
    return _error("api_error", f"Kubernetes API error: {error}")


def _error(reason: str, message: str) -> dict[str, Any]:
    return {"status": "error", "reason": reason, "message": redact(message)}


class RewardTrigger(BaseTrigger):
    """Defers until the training Job logs `Post RL Training:`, or fails fast with the reason.

    All progress is in the serialized kwargs (`state`), so a trigger rebuilt from
    `serialize()` continues from the last line read. (Airflow itself rebuilds a trigger from
    the kwargs it had at deferral: after a triggerer restart the log is read again from the
    start, which misses nothing; progress lines are logged again.)
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
        poll_interval: float = 30.0,
        pending_timeout: float = 1800.0,
        state: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.poll_interval = poll_interval
        self.follower = LogFollower(
            cluster_url=cluster_url,
            ssl_ca_cert=ssl_ca_cert,
            namespace=namespace,
            job_name=job_name,
            deadline=deadline,
            gcp_conn_id=gcp_conn_id,
            impersonation_chain=impersonation_chain,
            use_dns_endpoint=use_dns_endpoint,
            container_name=container_name,
            backend_jobset_name=backend_jobset_name,
            pending_timeout=pending_timeout,
            state=FollowState.from_dict(state),
            log=self.log,
            stream_log=True,
        )

    def serialize(self) -> tuple[str, dict[str, Any]]:
        f = self.follower
        return (
            "tpu_rl.reward_trigger.RewardTrigger",
            {
                "cluster_url": f.cluster_url,
                "ssl_ca_cert": f.ssl_ca_cert,
                "namespace": f.namespace,
                "job_name": f.job_name,
                "deadline": f.deadline,
                "gcp_conn_id": f.gcp_conn_id,
                "impersonation_chain": f.impersonation_chain,
                "use_dns_endpoint": f.use_dns_endpoint,
                "container_name": f.container_name,
                "backend_jobset_name": f.backend_jobset_name,
                "poll_interval": self.poll_interval,
                "pending_timeout": f.pending_timeout,
                "state": f.state.as_dict(),
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            payload = await self._wait()
        finally:  # also when the triggerer cancels the trigger
            await self.follower.close()
        await self.follower.release_backend()
        yield TriggerEvent(payload)

    async def on_kill(self) -> None:
        """The wait was cancelled by a user action (mark failed, clear) or the run timed out:
        free the TPUs now. Not called when the triggerer stops: the wait resumes elsewhere."""
        await self.follower.release_backend()

    async def _wait(self) -> dict[str, Any]:
        """Poll until there is an event to send, backing off on transient API errors."""
        failures, last_error = 0, None
        while True:
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
            await asyncio.sleep(self.poll_interval)
