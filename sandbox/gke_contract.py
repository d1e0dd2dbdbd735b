"""container.v1's discovery document as the contract of the sandbox's GKE seam.

The product reaches GKE through the google provider's GKEHook, whose ClusterManagerClient
speaks gRPC (provider google 22.8.0, hooks/kubernetes_engine.py lines 138-146: no `transport`),
and the sandbox answers those calls in Python, so no HTTP request reaches sandbox/discovery.py.
Each seam call is therefore turned into the HTTP request google-cloud-container's own REST
transport would send for it (its http rules, services/cluster_manager/transports/rest_base.py,
and `transcode_request`, the one rest.py calls): a request no rule or method takes, or one
its method's schema refuses, is Google's 400 INVALID_ARGUMENT (raised as the client raises it).
The seam's answer is written as the REST API sends it (proto3 JSON, camelCase, enums by name:
the message type's own `to_json`) and must fit the method's `response` schema, and its
server-defined links must be this API's URLs; a misfit is a sandbox bug (SchemaMismatch).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlencode, urlsplit

import proto
from google.api_core.exceptions import InvalidArgument
from google.api_core.rest_helpers import flatten_query_params, transcode_request
from google.cloud.container_v1.services.cluster_manager.transports.rest_base import (
    _BaseClusterManagerRestTransport as RestRules,
)

from sandbox import discovery

HOST = "container.googleapis.com"
# Server-defined links (container.v1.json: Cluster.selfLink and NodePool.selfLink "Server-defined
# URL for the resource", Operation.selfLink "Server-defined URI for the operation. Example:
# `https://container.googleapis.com/v1alpha1/projects/123/locations/us-central1/operations/
# operation-123`", Operation.targetLink "a URI to the resource being modified (such as a
# cluster, node pool, or node) ... `https://container.googleapis.com/v1/projects/123/locations/
# us-central1/clusters/my-cluster`"): each names a resource a GET method of the API reads.
LINKS = ("selfLink", "targetLink")

Answer = TypeVar("Answer", bound=proto.Message)


def cluster_path(hook: Any, name: str, project_id: str | None) -> str:
    """The cluster's resource name as GKEHook builds it (provider google 22.8.0,
    hooks/kubernetes_engine.py lines 234 and 330): the hook's location, zone or region."""
    return f"projects/{project_id}/locations/{hook.location}/clusters/{name}"


def link(resource: str) -> str:
    """A resource's server-defined URL (see LINKS): rootUrl, the version, its name."""
    return f"{discovery.document('container', 'v1')['rootUrl']}v1/{resource}"


def http_request(rpc: str, request: proto.Message) -> tuple[str, str, bytes]:
    """What ClusterManagerClient's REST transport sends for `request` to the ClusterManager
    RPC `rpc` (e.g. "GetCluster"): HTTP method, target (path?query) and JSON body. A request
    no http rule takes (a resource name outside `projects/*/locations/*/clusters/*`, ...) is
    the API's 400: container.v1.json gives each such path parameter its `pattern`, e.g.
    projects.locations.clusters.get `name`: "^projects/[^/]+/locations/[^/]+/clusters/[^/]+$"."""
    rules = getattr(RestRules, f"_Base{rpc}")._get_http_options()
    try:
        transcoded, body, query = transcode_request(rules, request, rest_numeric_enums=True)
    except ValueError as err:
        raise InvalidArgument(f"{rpc}: the request names no resource of the API: {err}") from err
    params = urlencode(flatten_query_params(query, strict=True))
    target = transcoded["uri"] + (f"?{params}" if params else "")
    return transcoded["method"].upper(), target, (body or "").encode()


def refuse_request(http_method: str, target: str, body: bytes) -> None:
    """InvalidArgument (Google's 400, as the client raises it) for a request container.v1's
    method schema refuses; SchemaMismatch when the document has no method for it at all."""
    if discovery.find_method(HOST, http_method, urlsplit(target).path) is None:
        raise discovery.SchemaMismatch(f"no container.v1 method takes {http_method} {target}")
    if refused := discovery.refusal(HOST, http_method, target, body):
        _, _, payload = refused
        error = payload["error"]
        raise InvalidArgument(error["message"], details=error["details"])


def answer_json(answer: proto.Message) -> dict[str, Any]:
    """The answer as the REST API sends it: proto3 JSON, camelCase names, enums by name, and
    no field at its default (proto-plus prints those unless told not to)."""
    as_json = type(answer).to_json(
        answer, use_integers_for_enums=False, always_print_fields_with_no_presence=False
    )
    return json.loads(as_json)


def verify_answer(http_method: str, target: str, payload: dict[str, Any]) -> None:
    """SchemaMismatch for an answer outside the method's `response` schema, or with a link
    that is not one of the API's resource URLs."""
    discovery.verify(HOST, http_method, target, 200, payload)
    for link in _links(payload):
        root = discovery.document("container", "v1")["rootUrl"]
        path = "/" + link.removeprefix(root)
        if not link.startswith(root) or discovery.find_method(HOST, "GET", path) is None:
            where = f"{http_method} {target} answered a link outside container.v1"
            raise discovery.SchemaMismatch(f"{where}: {link!r}")


def _links(value: Any) -> list[str]:
    """Every selfLink and targetLink in a JSON value."""
    if isinstance(value, list):
        return [link for item in value for link in _links(item)]
    if not isinstance(value, dict):
        return []
    own = [value[name] for name in LINKS if isinstance(value.get(name), str)]
    return own + [link for item in value.values() for link in _links(item)]


def checked_rpc(rpc: str, request: proto.Message, answer: Callable[[], Answer]) -> Answer:
    """The seam's `answer()` to the ClusterManager RPC `rpc` behind both checks: the request
    as the REST API would take it, then the answer as the REST API would send it."""
    http_method, target, body = http_request(rpc, request)
    refuse_request(http_method, target, body)
    result = answer()
    verify_answer(http_method, target, answer_json(result))
    return result
