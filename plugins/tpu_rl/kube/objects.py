"""Kubernetes access shared by the operators, the triggers, cleanup and the janitor.

API paths and labels, status-condition helpers, and the Job/JobSet calls that tolerate
"already exists" (409) and "already gone" (404), on the provider hooks' clients. What the
cleanup deletes, and how, is tpu_rl.kube.swept.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from kubernetes.client import ApiClient, BatchV1Api, CustomObjectsApi
from kubernetes.client import models as k8s
from kubernetes.client.rest import ApiException

JOBSET = {"group": "jobset.x-k8s.io", "version": "v1alpha2", "plural": "jobsets"}
JOBSET_API = f"/apis/{JOBSET['group']}/{JOBSET['version']}"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
FOREGROUND = "Foreground"
NODES_PATH = "/api/v1/nodes"


def ns_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}"


def pods_path(namespace: str) -> str:
    return f"{ns_path(namespace)}/pods"


def pod_log_path(namespace: str, pod: str) -> str:
    return f"{pods_path(namespace)}/{quote(pod, safe='')}/log"


def jobs_path(namespace: str) -> str:
    return f"/apis/batch/v1/namespaces/{quote(namespace, safe='')}/jobs"


def job_path(namespace: str, name: str) -> str:
    return f"{jobs_path(namespace)}/{quote(name, safe='')}"


def jobsets_path(namespace: str) -> str:
    return f"{JOBSET_API}/namespaces/{quote(namespace, safe='')}/jobsets"


def jobset_path(namespace: str, name: str) -> str:
    return f"{jobsets_path(namespace)}/{quote(name, safe='')}"


def true_conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The object's status conditions that are True, by type."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return {c.get("type", ""): c for c in conditions if c.get("status") == "True"}


def condition_text(condition: dict[str, Any]) -> str:
    parts = [condition.get("reason") or "", condition.get("message") or ""]
    return ": ".join(p for p in parts if p) or condition.get("type", "")


def condition(obj: dict[str, Any], kind: str) -> str | None:
    """The message of a true status condition of that type, if there is one."""
    if (found := true_conditions(obj).get(kind)) is None:
        return None
    return found.get("message") or found.get("reason") or kind


class _JsonResponse:
    """What ApiClient.deserialize reads: a response whose `data` is the JSON text."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.data = json.dumps(body)


def to_v1_job(manifest: dict[str, Any]) -> k8s.V1Job:
    """The kubernetes client's V1Job for a manifest dict (the provider takes models, not dicts)."""
    return ApiClient().deserialize(_JsonResponse(manifest), "V1Job")


def ignore_gone(call: Callable[..., Any], *args: Any, **kwargs: Any) -> bool:
    """Run a delete; True when it deleted something, False when it was already gone."""
    try:
        call(*args, **kwargs)
    except ApiException as err:
        if err.status == 404:
            return False
        raise
    return True


def delete_backend(api_client: Any, namespace: str, name: str) -> bool:
    """Delete the backend JobSet (it holds the TPUs); False when it was already gone."""
    return ignore_gone(
        CustomObjectsApi(api_client).delete_namespaced_custom_object,
        namespace=namespace,
        name=name,
        propagation_policy=FOREGROUND,
        **JOBSET,
    )


def create_job(api_client: Any, namespace: str, body: dict[str, Any]) -> bool:
    """Create a Job from its manifest; False when it exists already (an earlier try made it)."""
    try:
        BatchV1Api(api_client).create_namespaced_job(namespace, body)
    except ApiException as err:
        if err.status != 409:
            raise
        return False
    return True
