"""What the cleanup deletes: the swept kinds, in one table, and the sweep that walks it.

`cleanup_kubernetes`, the DAG's timeout callback and the janitor all go through SWEPT_KINDS,
in its order; the docs and step docs that list the kinds list them all, in prose, or point here
(tests/unit/kube/test_swept.py checks every such list against the table: cleanup_kubernetes's
doc, read at each parse of the DAG file, names them without importing this module). To change
what the cleanup deletes, change the table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from kubernetes.client.rest import ApiException

from tpu_rl.kube.objects import FOREGROUND, JOBSET, ignore_gone


@dataclass(frozen=True)
class SweptKind:
    """One kind of object the cleanup deletes: where it is listed, how it is deleted."""

    kind: str  # as a manifest names it; "s" added names it in prose ("JobSets")
    group: str  # API group, "" for the core group
    version: str
    plural: str  # the resource in the API path, and the kind's key in a sweep's report
    # DeleteOptions.propagationPolicy; None: the API server's default for the kind
    propagation: str | None
    why: str  # why it is swept, and at this place in the order (docs/operations.md shows it)

    @property
    def api(self) -> str:
        """The API path of the kind's group and version (the core group is /api/v1)."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def collection_path(self, namespace: str) -> str:
        return f"{self.api}/namespaces/{quote(namespace, safe='')}/{self.plural}"

    def object_path(self, namespace: str, name: str) -> str:
        return f"{self.collection_path(namespace)}/{quote(name, safe='')}"

    @property
    def prose(self) -> str:
        return f"{self.kind}s"


# Deleted in this order, each kind's objects picked by a label selector (the run's labels for
# cleanup_kubernetes and the timeout callback, the deployment's for the janitor).
SWEPT_KINDS = (
    SweptKind(
        kind="JobSet",
        group=JOBSET["group"],
        version=JOBSET["version"],
        plural=JOBSET["plural"],
        propagation=FOREGROUND,
        why="first: the Pathways backend holds the TPUs; Foreground, with its Jobs and their pods",
    ),
    # For batch/v1 the API server's default is to orphan a Job's pods (kubernetes/kubernetes
    # pkg/registry/batch/job/strategy.go, DefaultGarbageCollectionPolicy): Foreground.
    SweptKind(
        kind="Job",
        group="batch",
        version="v1",
        plural="jobs",
        propagation=FOREGROUND,
        why="the conversion, training, export and champion Jobs; Foreground, with their pods",
    ),
    SweptKind(
        kind="Secret",
        group="",
        version="v1",
        plural="secrets",
        propagation=None,
        why="last: the Hugging Face token the Jobs read; nothing depends on it",
    ),
)


def swept_kind(plural: str) -> SweptKind:
    """The table's row of a kind, by its plural ("jobs")."""
    return next(k for k in SWEPT_KINDS if k.plural == plural)


def kinds_text() -> str:
    """The swept kinds in prose, in their order: "JobSets, Jobs and Secrets"."""
    names = [k.prose for k in SWEPT_KINDS]
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]


def _call(api_client: Any, method: str, path: str, query: list[tuple[str, str]]) -> Any:
    """One request on the client's cluster (its bearer token), the JSON answer as a dict.

    Unparsed (`_preload_content=False`) and read as JSON here: the client's own deserializing
    takes `response_types_map` from kubernetes 35 on and `response_type` before (34.1.0, the
    oldest supported provider's: api_client.py `call_api`); both raise ApiException on a
    non-2xx answer either way (rest.py `request`: `if not 200 <= r.status <= 299`).
    """
    response = api_client.call_api(
        path,
        method,
        query_params=query,
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,  # the response alone, not (response, status, headers)
    )
    return json.loads(response.data)


def list_labelled(
    api_client: Any, kind: str, namespace: str, selector: str
) -> list[dict[str, Any]]:
    """Metadata (JSON form) of a swept kind's objects with those labels; only metadata, so a
    Secret's data never leaves this call.

    A 404 on the list means the API server does not serve the kind (the JobSet CRD is not
    installed): there is none of it. A namespace without objects answers an empty list.
    """
    swept = swept_kind(kind)
    query = [("labelSelector", selector)]
    try:
        found = _call(api_client, "GET", swept.collection_path(namespace), query)
    except ApiException as err:
        if err.status == 404:
            return []
        raise
    return [item["metadata"] for item in found.get("items") or []]


def delete_labelled(api_client: Any, kind: str, namespace: str, name: str) -> bool:
    """Delete one object of a swept kind, as the table says; False when it was already gone."""
    swept = swept_kind(kind)
    query = [("propagationPolicy", swept.propagation)] if swept.propagation else []
    return ignore_gone(_call, api_client, "DELETE", swept.object_path(namespace, name), query)


def sweep(api_client: Any, namespace: str, selector: str) -> tuple[dict[str, list[str]], list[str]]:
    """Delete every object of the swept kinds with those labels, in the table's order; each
    kind runs regardless.

    Returns the names deleted by kind (plural), and the errors ("kind: error") of kinds that
    failed.
    """
    removed: dict[str, list[str]] = {k.plural: [] for k in SWEPT_KINDS}
    errors: list[str] = []
    for swept in SWEPT_KINDS:
        try:
            for meta in list_labelled(api_client, swept.plural, namespace, selector):
                if delete_labelled(api_client, swept.plural, namespace, meta["name"]):
                    removed[swept.plural].append(meta["name"])
        except Exception as err:  # each kind runs even when another failed
            errors.append(f"{swept.plural}: {err}")
    return removed, errors
