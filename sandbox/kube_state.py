"""The emulated cluster's state: objects, container logs and the change feed; thread-safe."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import pickle
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sandbox.kube_logs import ContainerLog
from sandbox.kube_selectors import field_matcher, label_matcher
from sandbox.ledger import Ledger


def clone(obj: Any) -> Any:
    """A deep copy of plain API data, through pickle: about 4x copy.deepcopy's speed, and the
    controller copies every object it lists on each tick (in the process the bench times)."""
    return pickle.loads(pickle.dumps(obj, pickle.HIGHEST_PROTOCOL))


@dataclass(frozen=True)
class Resource:
    """One served resource type."""

    plural: str
    group: str
    version: str
    kind: str
    namespaced: bool = True
    has_status: bool = True
    also_served: tuple[str, ...] = ()  # older versions served with the same bodies

    @property
    def versions(self) -> tuple[str, ...]:
        return (self.version, *self.also_served)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """`jobs.batch`, `pods`: how the API names the resource in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


KUEUE_GROUP = "kueue.x-k8s.io"
FOREGROUND = "foregroundDeletion"
DEFAULT_GRACE_S = 30  # a pod's terminationGracePeriodSeconds default
HISTORY_LIMIT = 2000  # changes a watch can resume from; older resourceVersions answer 410

RESOURCES = {
    r.plural: r
    for r in (
        Resource("namespaces", "", "v1", "Namespace", namespaced=False),
        Resource("pods", "", "v1", "Pod"),
        Resource("secrets", "", "v1", "Secret", has_status=False),
        Resource("events", "", "v1", "Event", has_status=False),
        Resource("jobs", "batch", "v1", "Job"),
        Resource("jobsets", "jobset.x-k8s.io", "v1alpha2", "JobSet"),
        Resource("serviceaccounts", "", "v1", "ServiceAccount", has_status=False),
        Resource("nodes", "", "v1", "Node", namespaced=False),
        # what preflight reads of an existing cluster (sandbox/cluster_addons.py)
        Resource("deployments", "apps", "v1", "Deployment"),
        Resource("priorityclasses", "scheduling.k8s.io", "v1", "PriorityClass", namespaced=False),
        *(
            Resource(plural, KUEUE_GROUP, "v1beta2", kind, namespaced, also_served=("v1beta1",))
            for plural, kind, namespaced in (
                ("resourceflavors", "ResourceFlavor", False),
                ("clusterqueues", "ClusterQueue", False),
                ("localqueues", "LocalQueue", True),
                ("workloads", "Workload", True),
            )
        ),
    )
}
KINDS = {r.kind: r for r in RESOURCES.values()}
DEFAULT_NAMESPACES = ("default", "kube-system")

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_STATUS_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "AlreadyExists",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


class ApiError(Exception):
    """An error the API answers with a Kubernetes Status object."""

    def __init__(self, code: int, message: str, reason: str | None = None, **details: Any):
        super().__init__(message)
        self.code, self.message, self.details = code, message, details
        self.reason = reason or _STATUS_REASONS.get(code, "Unknown")

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def not_found(resource: Resource, name: str) -> ApiError:
    return ApiError(
        404,
        f'{resource.qualified} "{name}" not found',
        name=name,
        group=resource.group,
        kind=resource.plural,
    )


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def timestamp(at: dt.datetime | None = None) -> str:
    return (at or now()).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (strategic merge patches are treated the same way)."""
    if not isinstance(patch, dict):
        return clone(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 JSON patch: add, replace, remove, test."""
    doc = clone(target)
    for op in ops:
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]
        ]
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        key: Any = last if isinstance(node, dict) else (len(node) if last == "-" else int(last))
        match op["op"]:
            case "add" if isinstance(node, list):
                node.insert(key, op["value"])
            case "add" | "replace":
                node[key] = op["value"]
            case "remove":
                del node[key]
            case "test" if node[key] != op["value"]:
                raise ApiError(422, f"testing value {op['path']} failed")
            case "test":
                pass
            case other:
                raise ApiError(400, f"unsupported JSON patch op {other!r}")
    return doc


class ClusterState:
    """The objects, logs and change feed; thread-safe, usable from any thread."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._logs: dict[tuple[str, str, str], list[ContainerLog]] = {}
        self._changes: list[tuple[int, str, str, dict[str, Any]]] = []
        self._rv = 1000
        self.history_limit = HISTORY_LIMIT
        # Mutating admission webhooks: fn(resource, object) may change the object on create.
        self.admission_hooks: list[Callable[[Resource, dict[str, Any]], None]] = []
        self.cluster: Any = None  # the cluster_model.ClusterModel provisioned here, if any
        self.ledger = Ledger()  # node lifetimes, TPU pod run times, client attempts
        for ns in DEFAULT_NAMESPACES:
            self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    # -- objects --------------------------------------------------------------------------

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create any served kind; namespace defaults to `default`."""
        resource = KINDS.get(obj.get("kind", ""))
        if resource is None:
            raise ApiError(400, f"kind {obj.get('kind')!r} is not served by the emulator")
        namespace = obj.get("metadata", {}).get("namespace") or "default"
        return self.insert(resource, namespace if resource.namespaced else "", obj)

    def insert(self, resource: Resource, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        obj = clone(body)
        meta = obj.setdefault("metadata", {})
        if meta.get("namespace", namespace) != namespace:
            raise ApiError(
                400,
                "the namespace of the provided object does not match the namespace sent on "
                "the request",
            )
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        _validate(resource, obj)
        with self._lock:
            if resource.namespaced and ("namespaces", "", namespace) not in self._objects:
                raise not_found(RESOURCES["namespaces"], namespace)
            key = (resource.plural, namespace, meta["name"])
            if key in self._objects:
                raise ApiError(
                    409,
                    f'{resource.qualified} "{meta["name"]}" already exists',
                    name=meta["name"],
                    group=resource.group,
                    kind=resource.plural,
                )
            obj["apiVersion"], obj["kind"] = resource.api_version, resource.kind
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=timestamp(), generation=1)
            if resource.namespaced:
                meta["namespace"] = namespace
            for hook in self.admission_hooks:
                hook(resource, obj)
            _apply_defaults(resource, obj)
            self._store(resource, key, obj, "ADDED")
            return clone(obj)

    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        obj = self.get_shared(plural, namespace, name)
        return clone(obj) if obj else None

    def get_shared(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """As `get`, but the stored object, not a copy: see `list_shared`."""
        with self._lock:
            return self._objects.get((plural, self._ns(plural, namespace), name))

    def list(
        self,
        plural: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """Objects of one plural, optionally in one namespace and matching the selectors."""
        found = self.list_shared(plural, namespace, label_selector, field_selector)
        return [clone(obj) for obj in found]

    def list_shared(
        self,
        plural: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """As `list`, but the stored objects, not copies, for readers that never change what
        they read (the simulated controllers read every object on each tick). A write stores a
        new object and never changes a stored one, so what this returns stays as it was."""
        labels, fields = label_matcher(label_selector), field_matcher(field_selector)
        with self._lock:  # sorted after filtering: a pass lists per Job, among thousands
            found = [
                (key, obj)
                for key, obj in self._objects.items()
                if key[0] == plural and namespace in (None, key[1]) and labels(obj) and fields(obj)
            ]
        return [obj for _, obj in sorted(found, key=lambda item: item[0])]

    def delete(
        self,
        plural: str,
        namespace: str,
        name: str,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> bool:
        """Delete as the API server and garbage collector do; False if there is no such object.

        The default policy is the API server's: Orphan for batch/v1 Jobs, Background otherwise.
        Foreground keeps the owner (deletionTimestamp, finalizer `foregroundDeletion`) until its
        dependents are gone. A pod bound to a node is Terminating (deletionTimestamp) until its
        kubelet removes it (`grace_period_seconds=0`), unless it has already terminated.
        """
        with self._lock:
            obj = self._objects.get((plural, self._ns(plural, namespace), name))
            if obj is None:
                return False
            policy = propagation_policy or ("Orphan" if plural == "jobs" else "Background")
            self._delete_object(clone(obj), policy, grace_period_seconds)
            self._collect_garbage()
            return True

    def terminating(self, obj: dict[str, Any]) -> bool:
        return bool(obj["metadata"].get("deletionTimestamp"))

    def patch(self, plural: str, namespace: str, name: str, patch: dict[str, Any]) -> dict:
        """Merge-patch an object's metadata and spec (status is kept)."""
        with self._lock:
            current = self._require(plural, namespace, name)
            return self.replace(plural, namespace, name, merge_patch(current, patch))

    def patch_status(self, plural: str, namespace: str, name: str, patch: dict[str, Any]) -> dict:
        """Merge-patch an object's status."""
        with self._lock:
            stored = self._stored(plural, namespace, name)
            status = merge_patch(stored.get("status") or {}, patch)
            if status == stored.get("status"):
                return clone(stored)  # no change: no new resourceVersion (as `replace` decides)
            current = clone(stored)
            current["status"] = status
            return self.replace(plural, namespace, name, current, subresource="status")

    def replace(
        self,
        plural: str,
        namespace: str,
        name: str,
        body: dict[str, Any],
        subresource: str | None = None,
    ) -> dict[str, Any]:
        """PUT semantics: the main resource keeps its status, `status` keeps everything else."""
        resource = RESOURCES[plural]
        with self._lock:
            current = self._require(plural, namespace, name)
            meta = body.get("metadata") or {}
            sent_rv = meta.get("resourceVersion")
            if sent_rv and sent_rv != current["metadata"]["resourceVersion"]:
                raise ApiError(
                    409,
                    f'Operation cannot be fulfilled on {resource.qualified} "{name}": the object '
                    "has been modified; please apply your changes to the latest version and try "
                    "again",
                    reason="Conflict",
                )
            if subresource == "status":
                new = clone(current)
                new["status"] = clone(body.get("status") or {})
            else:
                new = clone(body)
                new["apiVersion"], new["kind"] = resource.api_version, resource.kind
                for frozen in ("uid", "creationTimestamp", "namespace", "name"):
                    if frozen in current["metadata"]:
                        new.setdefault("metadata", {})[frozen] = current["metadata"][frozen]
                    else:
                        new.setdefault("metadata", {}).pop(frozen, None)
                if resource.has_status:
                    new["status"] = clone(current.get("status") or {})
                _validate(resource, new)
                same_spec = new.get("spec") == current.get("spec")
                gen = current["metadata"].get("generation", 1)
                new["metadata"]["generation"] = gen if same_spec else gen + 1
            new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            if new == current:
                return current  # a no-op update makes no new resourceVersion
            key = (plural, current_ns(current), name)
            if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
                self._store(resource, key, new, "MODIFIED")
                self._remove(new)  # the last finalizer is gone
                self._collect_garbage()
            else:
                self._store(resource, key, new, "MODIFIED")
            return clone(new)

    # -- pods and their logs ----------------------------------------------------------------

    def append_log(
        self, namespace: str, pod: str, container: str, text: str, at: dt.datetime | None = None
    ) -> None:
        """Add output to the container's current instance; text may be many lines or partial."""
        with self._lock:
            self._container(namespace, pod, container)
            self._instances(namespace, pod, container)[-1].append(text, at or now())

    def restart_container(self, namespace: str, pod: str, container: str) -> None:
        """A new container instance: its log starts empty, restartCount + 1."""
        with self._lock:
            self._container(namespace, pod, container)
            self._instances(namespace, pod, container).append(ContainerLog())
            obj = self._require("pods", namespace, pod)
            statuses = obj.setdefault("status", {}).setdefault("containerStatuses", [])
            status = next((s for s in statuses if s["name"] == container), None)
            if status is None:
                images = {c["name"]: c.get("image", "") for c in obj["spec"]["containers"]}
                image = images.get(container, "")
                status = _container_status(container, "Running", None, None, image=image)
                statuses.append(status)
            last = status.get("state", {}).get("terminated") or {
                "exitCode": 1,
                "reason": "Error",
                "finishedAt": timestamp(),
            }
            status.update(
                lastState={"terminated": last},
                state={"running": {"startedAt": timestamp()}},
                restartCount=status.get("restartCount", 0) + 1,
            )
            self.replace("pods", namespace, pod, obj, subresource="status")

    def set_pod_phase(
        self,
        namespace: str,
        pod: str,
        phase: str,
        *,
        exit_code: int | None = None,
        reason: str | None = None,
        conditions: list[dict[str, Any]] | None = None,
        pod_reason: str | None = None,
        message: str | None = None,
    ) -> dict[str, Any]:
        """Set phase and every container's state; `reason` is the container state's reason,
        `pod_reason`/`message` the pod's own (`Terminated`, `Evicted`)."""
        with self._lock:
            obj = self._require("pods", namespace, pod)
            status = obj.setdefault("status", {})
            old = {s["name"]: s for s in status.get("containerStatuses", [])}
            status["phase"] = phase
            status["containerStatuses"] = [
                _container_status(
                    c["name"], phase, exit_code, reason, old.get(c["name"]), c.get("image", "")
                )
                for c in obj["spec"].get("containers", [])
            ]
            status["conditions"] = conditions or _pod_conditions(phase)
            if pod_reason:
                status.update(reason=pod_reason, message=message or "")
            if phase != "Pending":
                status.setdefault("startTime", timestamp())
                status.setdefault("hostIP", "10.128.0.2")
                status.setdefault("podIP", "10.4.0.7")
                for c in obj["spec"].get("containers", []):
                    if not self._logs.get((namespace, pod, c["name"])):
                        self._logs[(namespace, pod, c["name"])] = [ContainerLog()]
            return self.replace("pods", namespace, pod, obj, subresource="status")

    def set_job_condition(self, namespace: str, job: str, type_: str, **kwargs: str) -> dict:
        """Upsert a Job condition (status, reason, message); Complete also sets completionTime."""
        extra = {"completionTime": timestamp()} if type_ == "Complete" else {}
        return self._set_condition("jobs", namespace, job, type_, extra, **kwargs)

    def set_jobset_condition(self, namespace: str, jobset: str, type_: str, **kwargs: str) -> dict:
        """Upsert a JobSet condition (status, reason, message)."""
        return self._set_condition("jobsets", namespace, jobset, type_, {}, **kwargs)

    def read_log(
        self,
        namespace: str,
        pod: str,
        container: str | None,
        previous: bool = False,
    ) -> tuple[str, ContainerLog]:
        """The container's name and log instance, with the errors the API gives."""
        with self._lock:
            obj = self._objects.get(("pods", namespace, pod))
            if obj is None:
                raise not_found(RESOURCES["pods"], pod)
            names = [c["name"] for c in obj["spec"].get("containers", [])]
            if container is None:
                if len(names) != 1:
                    raise ApiError(
                        400,
                        f"a container name must be specified for pod {pod}, choose one of: "
                        f"[{' '.join(names)}]",
                    )
                container = names[0]
            if container not in names:
                raise ApiError(400, f"container {container} is not valid for pod {pod}")
            instances = self._logs.get((namespace, pod, container), [])
            if previous:
                if len(instances) < 2:
                    raise ApiError(
                        400,
                        f'previous terminated container "{container}" in pod "{pod}" not found',
                    )
                return container, instances[-2]
            if not instances:
                raise ApiError(
                    400,
                    f'container "{container}" in pod "{pod}" is waiting to start: '
                    "ContainerCreating",
                )
            return container, instances[-1]

    def container_done(self, namespace: str, pod: str, container: str) -> bool:
        """True once the pod is gone or the container terminated (ends a followed log)."""
        obj = self.get("pods", namespace, pod)
        if obj is None:
            return True
        for status in obj.get("status", {}).get("containerStatuses", []):
            if status["name"] == container:
                return "terminated" in status.get("state", {})
        return obj.get("status", {}).get("phase") in ("Succeeded", "Failed")

    def changes_since(self, rv: int) -> list[tuple[int, str, str, dict[str, Any]]]:
        """Watch events (resourceVersion, type, plural, object) after `rv`."""
        with self._lock:
            oldest = self._changes[0][0] if self._changes else self._rv + 1
            if rv < oldest - 1:
                raise ApiError(410, f"too old resource version: {rv} ({oldest - 1})")
            return [c for c in self._changes if c[0] > rv]

    @property
    def resource_version(self) -> int:
        return self._rv

    # -- internals --------------------------------------------------------------------------

    @staticmethod
    def _ns(plural: str, namespace: str) -> str:
        return namespace if RESOURCES[plural].namespaced else ""

    def _require(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        return clone(self._stored(plural, namespace, name))

    def _stored(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        """The stored object itself (not to be changed in place), or NotFound."""
        obj = self._objects.get((plural, self._ns(plural, namespace), name))
        if obj is None:
            raise not_found(RESOURCES[plural], name)
        return obj

    def _store(self, resource: Resource, key: tuple[str, str, str], obj: dict, kind: str) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        if kind == "DELETED":
            self._objects.pop(key, None)
        else:
            self._objects[key] = obj
        self._changes.append((self._rv, kind, resource.plural, clone(obj)))
        if resource.plural == "nodes" and kind != "MODIFIED":
            if kind == "ADDED":
                self.ledger.node_created(obj)
            else:
                self.ledger.node_deleted(obj["metadata"]["name"])
        elif resource.plural == "pods":
            phase = "Deleted" if kind == "DELETED" else (obj.get("status") or {}).get("phase")
            self.ledger.pod_phase(obj, phase or "Pending")
        if len(self._changes) > self.history_limit:
            del self._changes[: -self.history_limit]

    def _delete_object(self, obj: dict[str, Any], policy: str, grace: int | None) -> None:
        meta = obj["metadata"]
        resource = KINDS[obj["kind"]]
        if obj["kind"] == "Pod" and self._graceful(obj, grace):
            if not self.terminating(obj):
                meta["deletionTimestamp"] = timestamp()
                meta["deletionGracePeriodSeconds"] = (
                    grace
                    if grace is not None
                    else obj["spec"].get("terminationGracePeriodSeconds", DEFAULT_GRACE_S)
                )
                self._store(resource, _key(resource, obj), obj, "MODIFIED")
            return
        if self.terminating(obj) and not (obj["kind"] == "Pod" and grace == 0):
            return  # already being deleted
        uid = meta["uid"]
        for child in list(self._objects.values()):
            refs = child["metadata"].get("ownerReferences") or []
            if not any(r.get("uid") == uid for r in refs):
                continue
            if policy == "Orphan":
                child = clone(child)
                child["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != uid]
                self._store(
                    KINDS[child["kind"]], _key(KINDS[child["kind"]], child), child, "MODIFIED"
                )
            else:
                self._delete_object(clone(child), "Background", None)
        finalizers = list(meta.get("finalizers") or [])
        if policy == "Foreground" and self._dependents(uid):
            finalizers.append(FOREGROUND)
        if finalizers:
            meta["finalizers"], meta["deletionTimestamp"] = finalizers, timestamp()
            self._store(resource, _key(resource, obj), obj, "MODIFIED")
        else:
            self._remove(obj)

    def _graceful(self, pod: dict[str, Any], grace: int | None) -> bool:
        """A pod on a node whose containers still run waits for its kubelet."""
        bound = bool(pod["spec"].get("nodeName"))
        finished = pod.get("status", {}).get("phase") in ("Succeeded", "Failed")
        return bound and not finished and grace != 0

    def _dependents(self, uid: str) -> bool:
        return any(
            any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])
            for o in self._objects.values()
        )

    def _remove(self, obj: dict[str, Any]) -> None:
        resource = KINDS[obj["kind"]]
        key = _key(resource, obj)
        if resource.plural == "pods":
            for log_key in [k for k in self._logs if k[:2] == key[1:]]:
                del self._logs[log_key]
        gone = clone(self._objects.get(key, obj))
        gone["metadata"].setdefault("deletionTimestamp", timestamp())
        self._store(resource, key, gone, "DELETED")

    def _collect_garbage(self) -> None:
        """Finish foreground deletions whose dependents are all gone."""
        done = False
        while not done:
            done = True
            for obj in list(self._objects.values()):
                finalizers = obj["metadata"].get("finalizers") or []
                if FOREGROUND in finalizers and not self._dependents(obj["metadata"]["uid"]):
                    left = [f for f in finalizers if f != FOREGROUND]
                    obj = clone(obj)
                    obj["metadata"]["finalizers"] = left
                    resource = KINDS[obj["kind"]]
                    self._store(resource, _key(resource, obj), obj, "MODIFIED")
                    if not left:
                        self._remove(obj)
                    done = False

    def _container(self, namespace: str, pod: str, container: str) -> None:
        obj = self._require("pods", namespace, pod)
        if container not in [c["name"] for c in obj["spec"].get("containers", [])]:
            raise ValueError(f"pod {pod} has no container {container}")

    def _instances(self, namespace: str, pod: str, container: str) -> list[ContainerLog]:
        return self._logs.setdefault((namespace, pod, container), [ContainerLog()])

    def _set_condition(
        self,
        plural: str,
        namespace: str,
        name: str,
        type_: str,
        extra: dict[str, Any],
        *,
        status: str = "True",
        reason: str = "",
        message: str = "",
    ) -> dict[str, Any]:
        with self._lock:
            obj = self._require(plural, namespace, name)
            conditions = obj.setdefault("status", {}).setdefault("conditions", [])
            now = timestamp()
            condition = {
                "type": type_,
                "status": status,
                "reason": reason,
                "message": message,
                "lastProbeTime": now,
                "lastTransitionTime": now,
            }
            for i, existing in enumerate(conditions):
                if existing["type"] == type_:
                    if existing["status"] == status:
                        condition["lastTransitionTime"] = existing["lastTransitionTime"]
                    conditions[i] = condition
                    break
            else:
                conditions.append(condition)
            obj["status"].update(extra)
            return self.replace(plural, namespace, name, obj, subresource="status")


def current_ns(obj: dict[str, Any]) -> str:
    return obj["metadata"].get("namespace", "")


def _key(resource: Resource, obj: dict[str, Any]) -> tuple[str, str, str]:
    return (resource.plural, current_ns(obj), obj["metadata"]["name"])


def _invalid(resource: Resource, name: str, field: str, detail: str) -> ApiError:
    return ApiError(
        422, f'{resource.kind}.{resource.group or "core"} "{name}" is invalid: {field}: {detail}'
    )


def _validate(resource: Resource, obj: dict[str, Any]) -> None:
    """The API server's validations that the product can trip over."""
    meta = obj.get("metadata", {})
    name = meta.get("name") or ""
    if not name:
        raise _invalid(
            resource, "", "metadata.name", "Required value: name or generateName is required"
        )
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        raise _invalid(
            resource,
            name,
            "metadata.name",
            f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower case '
            "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
            "character",
        )
    for key, value in (meta.get("labels") or {}).items():
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            raise _invalid(
                resource,
                name,
                "metadata.labels",
                f'Invalid value: "{value}": must be no more than 63 characters and consist of '
                f"alphanumerics, '-', '_' or '.' (label {key})",
            )
    spec = obj.get("spec") or {}
    if resource.kind == "Job":
        if len(name) > 63:
            raise _invalid(
                resource,
                name,
                "spec.template.labels",
                f'Invalid value: "{name}": must be no more than 63 characters',
            )
        pod_spec = spec.get("template", {}).get("spec", {})
        if pod_spec.get("restartPolicy") not in ("Never", "OnFailure"):
            raise _invalid(
                resource,
                name,
                "spec.template.spec.restartPolicy",
                'Required value: valid values: "OnFailure", "Never"',
            )
        if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
            raise _invalid(
                resource,
                name,
                "spec.completions",
                "Required value: when completion mode is Indexed",
            )
    if resource.kind == "Pod" and not spec.get("containers"):
        raise _invalid(resource, name, "spec.containers", "Required value")
    if resource.kind == "JobSet":
        for rjob in spec.get("replicatedJobs", []):
            job_name = f"{name}-{rjob.get('name', '')}-{max(rjob.get('replicas', 1) - 1, 0)}"
            if len(job_name) > 63 or not _DNS_LABEL_1035.match(job_name):
                raise _invalid(
                    resource,
                    name,
                    "spec.replicatedJobs",
                    f'Invalid value: "{job_name}": generated Job names must be valid DNS-1035 '
                    "labels of at most 63 characters",
                )


def _apply_defaults(resource: Resource, obj: dict[str, Any]) -> None:
    """Defaults the API server sets on create."""
    meta = obj["metadata"]
    spec = obj.setdefault("spec", {}) if resource.kind in ("Pod", "Job", "JobSet") else {}
    if resource.kind == "Secret":
        obj.setdefault("type", "Opaque")
        data = obj.setdefault("data", {})
        for key, value in (obj.pop("stringData", None) or {}).items():
            data[key] = base64.b64encode(value.encode()).decode()
    elif resource.kind == "Namespace":
        obj["status"] = {"phase": "Active"}
    elif resource.kind == "Pod":
        spec.setdefault("restartPolicy", "Always")
        obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
    elif resource.kind == "Job":
        if spec.get("completions") is None and spec.get("parallelism") is None:
            spec["completions"] = 1
        spec.setdefault("parallelism", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
        job_labels = {
            "batch.kubernetes.io/controller-uid": meta["uid"],
            "batch.kubernetes.io/job-name": meta["name"],
            "controller-uid": meta["uid"],
            "job-name": meta["name"],
        }
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": meta["uid"]}}
        template_meta = spec.setdefault("template", {}).setdefault("metadata", {})
        template_meta["labels"] = {**(template_meta.get("labels") or {}), **job_labels}
        obj["status"] = {}
    elif resource.kind == "JobSet":
        obj["status"] = {}


def _container_status(
    name: str,
    phase: str,
    exit_code: int | None,
    reason: str | None,
    old: dict[str, Any] | None = None,
    image: str = "",
) -> dict[str, Any]:
    """A container's status as the kubelet reports it; its `imageID` once the image is pulled
    (not while Pending), as containerd reports it: the repository digest (image_id)."""
    started = ((old or {}).get("state", {}).get("running") or {}).get("startedAt") or timestamp()
    if phase == "Pending":
        state = {"waiting": {"reason": reason or "ContainerCreating"}}
    elif phase == "Running":
        state = {"running": {"startedAt": started}}
    else:
        code = exit_code if exit_code is not None else (0 if phase == "Succeeded" else 1)
        state = {
            "terminated": {
                "exitCode": code,
                "reason": reason or ("Completed" if code == 0 else "Error"),
                "startedAt": started,
                "finishedAt": timestamp(),
            }
        }
    return {
        "name": name,
        "state": state,
        "lastState": (old or {}).get("lastState", {}),
        "ready": phase == "Running",
        "started": phase == "Running",
        "restartCount": (old or {}).get("restartCount", 0),
        "image": image,
        "imageID": "" if phase == "Pending" or not image else image_id(image),
    }


def image_id(reference: str) -> str:
    """The repository digest a runtime reports for `reference`: the digest it pins, or, for a
    tag, one the sandbox derives from it (the same tag, the same digest, as a registry's tag
    keeps its digest until pushed again)."""
    if "@sha256:" in reference:
        return reference
    repository = reference.rsplit(":", 1)[0] if ":" in reference.rsplit("/", 1)[-1] else reference
    return f"{repository}@sha256:{hashlib.sha256(reference.encode()).hexdigest()}"


def _pod_conditions(phase: str) -> list[dict[str, Any]]:
    ready = "True" if phase == "Running" else "False"
    now = timestamp()
    return [
        {"type": t, "status": s, "lastProbeTime": None, "lastTransitionTime": now}
        for t, s in (
            ("PodScheduled", "True"),
            ("Initialized", "True"),
            ("ContainersReady", ready),
            ("Ready", ready),
        )
    ]
