"""Kubernetes API emulator on loopback: TLS, bearer token, the objects the product uses.

Written on aiohttp rather than kmock 0.8: kmock has no labelSelector filtering, no pod log
subresource, no cascading delete and no TLS, and those are what the product depends on.
The contract is sandbox/EMULATOR_API.md; the state behind it is kube_state.ClusterState.
"""

import asyncio
import base64
import contextlib
import datetime as dt
import ipaddress
import json
import logging
import re
import shutil
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from sandbox.kube_logs import parse_since_time
from sandbox.kube_selectors import SelectorError, field_matcher, label_matcher
from sandbox.kube_state import (
    RESOURCES,
    ApiError,
    ClusterState,
    Resource,
    current_ns,
    json_patch,
    merge_patch,
    now,
    timestamp,
)

log = logging.getLogger(__name__)
STREAMED_BYTES = web.RequestKey("streamed_bytes", int)

POLL_S = 0.05  # how often follow and watch streams look for news
K8S_VERSION = {
    "major": "1",
    "minor": "35",
    "gitVersion": "v1.35.0-gke.1795000",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25.5",
    "compiler": "gc",
    "platform": "linux/amd64",
}


@dataclass(frozen=True)
class RequestRecord:
    """One HTTP request the emulator answered."""

    method: str
    path: str
    query: dict[str, str]
    status: int
    response_bytes: int


@dataclass
class _Fault:
    status: int
    remaining: int
    pattern: re.Pattern[str]
    retry_after: int | None


def _make_tls(directory: Path) -> tuple[bytes, ssl.SSLContext]:
    """A fresh CA and a server certificate for 127.0.0.1 and localhost; returns the CA PEM."""

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    started = now()
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(name("kube-emulator-ca"))
        .issuer_name(name("kube-emulator-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(started - dt.timedelta(minutes=5))
        .not_valid_after(started + dt.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), True
        )
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name("kube-apiserver"))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(started - dt.timedelta(minutes=5))
        .not_valid_after(started + dt.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    (directory / "server.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM) + ca_pem)
    (directory / "server.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    (directory / "ca.crt").write_bytes(ca_pem)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(directory / "server.crt", directory / "server.key")
    return ca_pem, context


class KubeEmulator(ClusterState):
    """The API server: ClusterState served over HTTPS from a background thread."""

    def __init__(self, token: str = "sandbox-token") -> None:
        super().__init__()
        self.token = token
        self.requests: list[RequestRecord] = []
        self._faults: list[_Fault] = []
        self._dir = Path(tempfile.mkdtemp(prefix="kube-emulator-"))
        self._ca_pem, self._ssl = _make_tls(self._dir)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_b64(self) -> str:
        """Base64 of the CA PEM, as GKE's master_auth.cluster_ca_certificate."""
        return base64.b64encode(self._ca_pem).decode()

    @property
    def ca_file(self) -> str:
        """Path of the CA PEM file (for Configuration.ssl_ca_cert)."""
        return str(self._dir / "ca.crt")

    def set_token(self, new_token: str) -> None:
        """Accept only `new_token` from now on; the old one answers 401."""
        self.token = new_token

    def inject_faults(
        self, status: int, count: int, path_regex: str = ".*", retry_after: int | None = None
    ) -> None:
        """Answer the next `count` requests whose path matches with `status`."""
        if status == 429 and retry_after is None:
            retry_after = 1
        with self._lock:
            self._faults.append(_Fault(status, count, re.compile(path_regex), retry_after))

    # -- lifecycle --------------------------------------------------------------------------

    def start_in_thread(self) -> "KubeEmulator":
        started = threading.Event()
        self._thread = threading.Thread(
            target=self._serve, args=(started,), name="kube-emulator", daemon=True
        )
        self._thread.start()
        if not started.wait(10) or not self.port:
            raise RuntimeError("kube emulator did not start")
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._loop and self._thread:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        shutil.rmtree(self._dir, ignore_errors=True)

    def _serve(self, started: threading.Event) -> None:
        self._loop = loop = asyncio.new_event_loop()
        app = web.Application(middlewares=[self._middleware], client_max_size=16 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1)
        try:
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=self._ssl)
            loop.run_until_complete(site.start())
            self.port = runner.addresses[0][1]
        finally:
            started.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    # -- HTTP -------------------------------------------------------------------------------

    @web.middleware
    async def _middleware(
        self, request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        try:
            self._check_fault(request.path)
            self._check_auth(request)
            response = await handler(request)
        except ApiError as error:
            response = _json(error.status(), error.code)
            if retry := (error.details or {}).get("retryAfterSeconds"):
                response.headers["Retry-After"] = str(retry)
        except SelectorError as error:
            response = _json(ApiError(400, str(error)).status(), 400)
        except Exception as error:
            log.exception("kube emulator: %s %s failed", request.method, request.path)
            response = _json(ApiError(500, f"emulator error: {error!r}").status(), 500)
        size = request.get(STREAMED_BYTES)
        if size is None:
            size = len(response.body or b"") if isinstance(response, web.Response) else 0
        self.requests.append(
            RequestRecord(request.method, request.path, dict(request.query), response.status, size)
        )
        return response

    def _check_fault(self, path: str) -> None:
        with self._lock:
            fault = next((f for f in self._faults if f.remaining and f.pattern.search(path)), None)
            if fault is None:
                return
            fault.remaining -= 1
        messages = {429: "Too many requests, please try again later."}
        error = ApiError(fault.status, messages.get(fault.status, "injected fault"))
        if fault.retry_after is not None:
            error.details = {"retryAfterSeconds": fault.retry_after}
        raise error

    def _check_auth(self, request: web.Request) -> None:
        if request.path in ("/version", "/healthz", "/livez", "/readyz"):
            return
        if request.headers.get("Authorization", "") != f"Bearer {self.token}":
            raise ApiError(401, "Unauthorized")

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if path == "/version":
            return _json(K8S_VERSION)
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok")
        if (discovery := self._discovery(path)) is not None:
            return _json(discovery)
        resource, namespace, name, sub = _route(path)
        method = request.method
        if name is None:
            if method == "GET" and _flag(request.query, "watch"):
                return await self._watch(request, resource, namespace)
            if method == "GET":
                return _json(self._list_body(request, resource, namespace))
            if method == "POST":
                return _json(self.insert(resource, namespace or "", await request.json()), 201)
            if method == "DELETE":
                return await self._delete_collection(request, resource, namespace)
        elif sub == "log" and method == "GET":
            return await self._log(request, namespace or "", name)
        elif sub in (None, "status"):
            if method == "GET":
                return _json(self._require(resource.plural, namespace or "", name))
            if method == "PUT":
                body = await request.json()
                return _json(self.replace(resource.plural, namespace or "", name, body, sub))
            if method == "PATCH":
                return _json(await self._patch(request, resource, namespace or "", name, sub))
            if method == "DELETE" and sub is None:
                return await self._delete(request, resource, namespace or "", name)
        raise ApiError(405, "the server does not allow this method on the requested resource")

    def _list_body(
        self, request: web.Request, resource: Resource, namespace: str | None
    ) -> dict[str, Any]:
        items = self.list(
            resource.plural,
            namespace,
            request.query.get("labelSelector"),
            request.query.get("fieldSelector"),
        )
        return {
            "kind": f"{resource.kind}List",
            "apiVersion": resource.api_version,
            "metadata": {"resourceVersion": str(self.resource_version)},
            "items": items,
        }

    async def _patch(
        self, request: web.Request, resource: Resource, namespace: str, name: str, sub: str | None
    ) -> dict[str, Any]:
        content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
        body = await request.json()
        current = self._require(resource.plural, namespace, name)
        if content_type == "application/json-patch+json":
            if not isinstance(body, list):
                raise ApiError(
                    400, "json: cannot unmarshal object into Go value of type jsonpatch.Patch"
                )
            patched = json_patch(current, body)
        elif content_type == "application/merge-patch+json" or (
            content_type == "application/strategic-merge-patch+json"
            and resource.group in ("", "batch")
        ):
            patched = merge_patch(current, body)
        else:
            raise ApiError(
                415,
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json-patch+json, application/merge-patch+json",
            )
        patched["metadata"].pop("resourceVersion", None)
        if (body if isinstance(body, dict) else {}).get("metadata", {}).get("resourceVersion"):
            patched["metadata"]["resourceVersion"] = body["metadata"]["resourceVersion"]
        return self.replace(resource.plural, namespace, name, patched, sub)

    async def _delete(
        self, request: web.Request, resource: Resource, namespace: str, name: str
    ) -> web.Response:
        obj = self._require(resource.plural, namespace, name)
        policy, grace = await _delete_options(request)
        self.delete(resource.plural, namespace, name, policy, grace)
        still = self.get(resource.plural, namespace, name)
        if still is not None:  # Terminating: finalizers or a pod's grace period
            return _json(still, 202 if policy == "Foreground" else 200)
        if resource.plural == "pods":
            obj["metadata"]["deletionTimestamp"] = timestamp()
            return _json(obj)
        return _json(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": {
                    "name": name,
                    "group": resource.group,
                    "kind": resource.plural,
                    "uid": obj["metadata"]["uid"],
                },
            }
        )

    async def _delete_collection(
        self, request: web.Request, resource: Resource, namespace: str | None
    ) -> web.Response:
        body = self._list_body(request, resource, namespace)
        policy, grace = await _delete_options(request)
        for obj in body["items"]:
            self.delete(resource.plural, current_ns(obj), obj["metadata"]["name"], policy, grace)
        return _json(body)

    async def _log(self, request: web.Request, namespace: str, pod: str) -> web.StreamResponse:
        query = request.query
        previous = _flag(query, "previous")
        container, log_ = self.read_log(namespace, pod, query.get("container"), previous)
        since = None
        try:
            if "sinceTime" in query:
                since = parse_since_time(query["sinceTime"])
            elif "sinceSeconds" in query:
                since = now() - dt.timedelta(seconds=int(query["sinceSeconds"]))
            tail = int(query["tailLines"]) if "tailLines" in query else None
            limit = int(query["limitBytes"]) if "limitBytes" in query else None
        except ValueError as error:
            raise ApiError(400, f"invalid log options: {error}") from error
        timestamps = _flag(query, "timestamps")
        with self._lock:
            sent = log_.select(since, tail)
            data = log_.render(sent, timestamps)
            next_index = len(log_.records)  # with the data: a record appended later is streamed
        if not _flag(query, "follow") or previous:
            data = data[:limit] if limit is not None else data
            return web.Response(body=data, content_type="text/plain")
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        request[STREAMED_BYTES] = total = 0  # kept current: the client may hang up at any time
        with contextlib.suppress(ConnectionResetError):  # it hung up during a write
            while True:
                if limit is not None:
                    data = data[: limit - total]
                await response.write(data)
                request[STREAMED_BYTES] = total = total + len(data)
                if (limit is not None and total >= limit) or self._stopping.is_set():
                    break
                if request.transport is None or request.transport.is_closing():
                    return response  # the client hung up: stop following for it
                done = self.container_done(namespace, pod, container)
                with self._lock:
                    new = list(range(next_index, len(log_.records)))
                    next_index = len(log_.records)
                    data = log_.render(new, timestamps)
                if done and not data:
                    break
                if not data:
                    await asyncio.sleep(POLL_S)
        return response  # aiohttp ends it once _middleware has recorded it, not before

    async def _watch(
        self, request: web.Request, resource: Resource, namespace: str | None
    ) -> web.StreamResponse:
        labels = label_matcher(request.query.get("labelSelector"))
        fields = field_matcher(request.query.get("fieldSelector"))
        timeout = min(float(request.query.get("timeoutSeconds", 30)), 30)
        rv = request.query.get("resourceVersion", "")
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        if rv in ("", "0"):
            rv = str(self.resource_version)
            events = [("ADDED", o) for o in self._list_body(request, resource, namespace)["items"]]
        else:
            events = []
        last = int(rv)
        request[STREAMED_BYTES] = 0
        deadline = asyncio.get_running_loop().time() + timeout
        try:
            while True:
                for type_, obj in events:
                    line = json.dumps({"type": type_, "object": obj}).encode() + b"\n"
                    await response.write(line)
                    request[STREAMED_BYTES] += len(line)
                if self._stopping.is_set() or asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(POLL_S)
                events = []
                try:
                    changes = self.changes_since(last)
                except ApiError as gone:  # the API answers a too-old watch with an ERROR event
                    events = [("ERROR", gone.status())]
                    deadline = 0.0
                    continue
                for change_rv, type_, plural, obj in changes:
                    last = change_rv
                    wanted = plural == resource.plural and namespace in (None, current_ns(obj))
                    if wanted and labels(obj) and fields(obj):
                        events.append((type_, obj))
            await response.write_eof()
        except ConnectionResetError:  # the client stopped watching, as a watch's client may
            pass
        return response

    def _discovery(self, path: str) -> dict[str, Any] | None:
        group_versions: dict[str, list[str]] = {}
        for r in RESOURCES.values():
            if r.group:
                known = group_versions.setdefault(r.group, [])
                known += [v for v in r.versions if v not in known]
        groups = sorted((g, v) for g, vs in group_versions.items() for v in vs)
        if path == "/api":
            return {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{self.port}"}
                ],
            }
        if path == "/apis":
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [_group_body(g, vs) for g, vs in sorted(group_versions.items())],
            }
        for group, version in [("", "v1"), *groups]:
            prefix = f"/apis/{group}" if group else "/api"
            if group and path == prefix:
                body = _group_body(group, group_versions[group])
                return {"kind": "APIGroup", "apiVersion": "v1", **body}
            if path == f"{prefix}/{version}":
                return {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": f"{group}/{version}" if group else version,
                    "resources": _resource_list(group, version),
                }
        return None


def _group_body(group: str, versions: list[str]) -> dict[str, Any]:
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


def _resource_list(group: str, version: str) -> list[dict[str, Any]]:
    out = []
    for r in RESOURCES.values():
        if r.group != group or version not in r.versions:
            continue
        verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        out.append(
            {
                "name": r.plural,
                "singularName": r.kind.lower(),
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": verbs,
            }
        )
        if r.has_status:
            out.append(
                {
                    "name": f"{r.plural}/status",
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
    if (group, version) == ("", "v1"):
        out.append(
            {
                "name": "pods/log",
                "singularName": "",
                "namespaced": True,
                "kind": "Pod",
                "verbs": ["get"],
            }
        )
    return out


def _route(path: str) -> tuple[Resource, str | None, str | None, str | None]:
    """Split a resource path into (resource, namespace, name, subresource)."""
    parts = path.strip("/").split("/")
    if parts[0] == "api" and len(parts) > 2 and parts[1] == "v1":
        group, version, rest = "", "v1", parts[2:]
    elif parts[0] == "apis" and len(parts) > 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise ApiError(404, "the server could not find the requested resource")
    served = {r.plural: r for r in RESOURCES.values() if r.group == group and version in r.versions}
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] in served:
        namespace, rest = rest[1], rest[2:]
    resource = served.get(rest[0])
    if (
        resource is None
        or len(rest) > 3
        or (
            (namespace is not None) != resource.namespaced
            and (len(rest) > 1 or not resource.namespaced)
        )
    ):
        raise ApiError(404, "the server could not find the requested resource")
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if sub not in (None, "status", "log") or (sub == "log" and resource.plural != "pods"):
        raise ApiError(404, "the server could not find the requested resource")
    return resource, namespace, name, sub


async def _delete_options(request: web.Request) -> tuple[str | None, int | None]:
    """propagationPolicy and gracePeriodSeconds from the query or a DeleteOptions body."""
    policy = request.query.get("propagationPolicy")
    grace = request.query.get("gracePeriodSeconds")
    if request.can_read_body:
        with contextlib.suppress(ValueError):
            body = await request.json()
            if isinstance(body, dict):
                policy = body.get("propagationPolicy") or policy
                grace = body.get("gracePeriodSeconds", grace)
                if body.get("orphanDependents") is True:
                    policy = "Orphan"
    if _flag(request.query, "orphanDependents"):
        policy = "Orphan"
    try:
        return policy, int(grace) if grace is not None else None
    except ValueError as error:
        raise ApiError(400, f"invalid gracePeriodSeconds: {grace}") from error


def _flag(query: Mapping[str, str], name: str) -> bool:
    """A boolean query parameter, parsed like Go's strconv.ParseBool."""
    return query.get(name, "false") in ("1", "t", "T", "true", "TRUE", "True")


def _json(body: dict[str, Any], status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type="application/json")


@contextlib.contextmanager
def running_emulator(token: str = "sandbox-token") -> Iterator[KubeEmulator]:
    """A started emulator, stopped on exit."""
    emu = KubeEmulator(token).start_in_thread()
    try:
        yield emu
    finally:
        emu.stop()
