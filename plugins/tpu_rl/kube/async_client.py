"""Async Kubernetes reads for the triggers, over the provider hook's kubernetes_asyncio client.

JSON reads, watches and the followed log go through `ApiClient.call_api` unparsed: the
verdicts read plain JSON, and the typed `read_namespaced_pod_log` has no `sinceTime` (only
`sinceSeconds`, which depends on the two clocks agreeing). The last-lines read for error
messages uses the typed client as is.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, Callable, Iterator
from typing import Any, TypedDict

import aiohttp
from kubernetes_asyncio.client import ApiClient, CoreV1Api
from kubernetes_asyncio.client.exceptions import ApiException

REQUEST_TIMEOUT_S = 60
# An open log or watch stream: no total limit; a connection silent this long is broken.
STREAM_TIMEOUT = aiohttp.ClientTimeout(
    total=None, connect=REQUEST_TIMEOUT_S, sock_read=REQUEST_TIMEOUT_S
)
WATCH_TIMEOUT_S = 50  # the server ends a watch after this; it is then opened again


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


@contextlib.contextmanager
def answered(what: str) -> Iterator[None]:
    """Turn a request that got no answer (timeout, connection, TLS) into status 0."""
    try:
        yield
    except (TimeoutError, aiohttp.ClientError, OSError) as error:
        raise KubeApiError(0, f"{what}: {type(error).__name__}: {error}") from error


def api_error(what: str, status: int, retry_header: str | None, body: bytes) -> KubeApiError:
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
    return KubeApiError(status, f"{what}: {message}", retry_after)


class LogContainer(TypedDict, total=False):
    """The container whose log a read names; none: the pod's only container."""

    container: str


class AsyncKube:
    """Raw JSON, watch and log access through one ApiClient (auth, TLS, host); counts bytes."""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self.bytes_read = 0

    async def open(
        self,
        path: str,
        query: list[tuple[str, str]] | None = None,
        timeout: float | aiohttp.ClientTimeout = REQUEST_TIMEOUT_S,
        method: str = "GET",
        body: Any = None,
        content_type: str = "application/json",
    ) -> aiohttp.ClientResponse:
        """Send a request: the 2xx response with its body unread (the caller closes it)."""
        what = f"{method} {path}"
        with answered(what):
            # unparsed (_preload_content=False), call_api answers aiohttp's response itself
            # (kubernetes_asyncio 36.1.0 client/api_client.py:199-200 `if not
            # _preload_content: return return_data`, rest.py:197-209 `return r`)
            response: aiohttp.ClientResponse = await self.client.call_api(
                path,
                method,
                query_params=query or [],
                header_params={"Accept": "application/json, */*", "Content-Type": content_type},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout,
            )
            if 200 <= response.status < 300:
                return response
            async with response:
                data = await response.read()
        self.bytes_read += len(data)
        raise api_error(what, response.status, response.headers.get("Retry-After"), data)

    async def get_json(
        self, path: str, query: list[tuple[str, str]] | None = None
    ) -> dict[str, Any]:
        """GET a Kubernetes object or list: a JSON object."""
        response = await self.open(path, query)
        with answered(f"GET {path}"):
            async with response:
                data = await response.read()
        self.bytes_read += len(data)
        answer: dict[str, Any] = json.loads(data)
        return answer

    async def get_optional(self, path: str) -> dict[str, Any] | None:
        """GET an object; None if it does not exist."""
        try:
            return await self.get_json(path)
        except KubeApiError as error:
            if error.status == 404:
                return None
            raise

    async def list_items(self, path: str, selector: str) -> list[dict[str, Any]]:
        return (await self.get_json(path, [("labelSelector", selector)])).get("items") or []

    async def merge_patch(self, path: str, body: dict[str, Any]) -> None:
        response = await self.open(
            path, method="PATCH", body=body, content_type="application/merge-patch+json"
        )
        response.close()

    async def delete(self, path: str) -> int:
        """DELETE (Foreground); the answer's status, 404 included."""
        try:
            response = await self.open(
                path, method="DELETE", body={"propagationPolicy": "Foreground"}
            )
        except KubeApiError as error:
            if error.status == 404:
                return 404
            raise
        response.close()
        return response.status

    async def watch(
        self, path: str, query: list[tuple[str, str]], opened: Callable[[], None] = lambda: None
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The events of one watch request, until the server ends it; `opened()` once the
        server has accepted it."""
        params = [*query, ("watch", "true"), ("timeoutSeconds", str(WATCH_TIMEOUT_S))]
        response = await self.open(path, params, STREAM_TIMEOUT)
        opened()
        with answered(f"watch {path}"):
            async with response:
                async for line in response.content:
                    self.bytes_read += len(line)
                    if line.strip():
                        yield json.loads(line)

    async def tail_log(self, namespace: str, pod: str, container: str | None, lines: int) -> str:
        """The pod's last log lines, through the typed client."""
        kwargs: LogContainer = {"container": container} if container else {}
        with answered(f"log of {pod}"):
            try:
                text = await CoreV1Api(self.client).read_namespaced_pod_log(
                    pod, namespace, tail_lines=lines, _request_timeout=REQUEST_TIMEOUT_S, **kwargs
                )
            except ApiException as error:
                raise KubeApiError(error.status, f"log of {pod}: {error.reason}") from error
        self.bytes_read += len(text)
        return text


class OnDemandKube(AsyncKube):
    """An AsyncKube that opens its connection at the first request, in `stack`: a poll that
    has nothing to ask the API costs no client, token or TLS session."""

    def __init__(self, connect: Callable[[], Any], stack: contextlib.AsyncExitStack) -> None:
        super().__init__(None)  # type: ignore[arg-type]
        self._connect = connect
        self._stack = stack

    async def _connection(self) -> None:
        if self.client is None:
            self.client = await self._stack.enter_async_context(self._connect())

    async def open(self, *args: Any, **kwargs: Any) -> aiohttp.ClientResponse:
        await self._connection()
        return await super().open(*args, **kwargs)

    async def tail_log(self, namespace: str, pod: str, container: str | None, lines: int) -> str:
        await self._connection()
        return await super().tail_log(namespace, pod, container, lines)
