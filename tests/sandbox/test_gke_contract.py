"""The sandbox's GKE seam is held to container.v1's discovery document (sandbox/gke_contract.py):
a request the API refuses (a resource name in the wrong format, a body field of the wrong type)
is Google's 400 INVALID_ARGUMENT; an answer outside the schema, or with a link that is not one
of the API's URLs, is a sandbox bug; the seam's own answers for the tutorial's cluster fit."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from google.api_core.exceptions import InvalidArgument
from google.cloud.container_v1.types import (
    CreateNodePoolRequest,
    DeleteClusterRequest,
    GetNodePoolRequest,
    NodePool,
    Operation,
)

from sandbox import gke_contract
from sandbox.cloud import GkeControlPlane, add_running_cluster
from sandbox.discovery import SchemaMismatch
from sandbox.harness import EXISTING_CLUSTER_VARS, SETTINGS
from sandbox.kube_emulator import KubeEmulator, running_emulator

PROJECT, CLUSTER = SETTINGS["project"], SETTINGS["cluster_name"]
CLUSTER_PATH = f"projects/{PROJECT}/locations/{SETTINGS['region']}/clusters/{CLUSTER}"
POOL_PATH = f"{CLUSTER_PATH}/nodePools/tpu-pool-0"


@pytest.fixture
def emu() -> Iterator[KubeEmulator]:
    with running_emulator() as emulator:
        yield emulator


@pytest.fixture
def control_plane(emu: KubeEmulator, tmp_path: Path) -> GkeControlPlane:
    """The seam over a fake cloud holding the tutorial's existing cluster."""
    state = tmp_path / "cloud.json"
    add_running_cluster(state, CLUSTER, PROJECT, EXISTING_CLUSTER_VARS)
    return GkeControlPlane(emu, state)


def hook(location: str = SETTINGS["region"]) -> SimpleNamespace:
    """What the seam reads of a GKEHook: its location."""
    return SimpleNamespace(location=location)


def test_the_tutorials_cluster_answers_fit_container_v1(control_plane: GkeControlPlane) -> None:
    """clusters.get and clusters.list of an existing cluster, and its clusters.delete: each
    request and answer passes the contract (checked_rpc inside the seam)."""
    cluster = control_plane.get_cluster(hook(), CLUSTER, PROJECT)
    listed = control_plane.list_clusters(f"projects/{PROJECT}/locations/-").clusters
    assert cluster.node_pools and [c.name for c in listed] == [CLUSTER]
    operation = control_plane.delete_cluster(hook(), CLUSTER, PROJECT)
    assert operation is not None and operation.operation_type == Operation.Type.DELETE_CLUSTER


def test_the_delete_operation_links_are_the_apis_urls(control_plane: GkeControlPlane) -> None:
    """Operation.targetLink is "a URI to the resource being modified" (container.v1.json)."""
    operation = control_plane.delete_cluster(hook(), CLUSTER, PROJECT)
    assert operation is not None
    gke_contract.verify_answer("DELETE", f"/v1/{CLUSTER_PATH}", gke_contract.answer_json(operation))
    assert operation.target_link == f"https://container.googleapis.com/v1/{CLUSTER_PATH}"


@pytest.mark.parametrize("name", [f"{CLUSTER}/nodePools/x", ""])
def test_a_cluster_name_in_the_wrong_format_is_refused(
    control_plane: GkeControlPlane, name: str
) -> None:
    """clusters.get's `name` must match ^projects/[^/]+/locations/[^/]+/clusters/[^/]+$."""
    with pytest.raises(InvalidArgument, match="projects/\\*/locations/\\*/clusters/\\*"):
        control_plane.get_cluster(hook(), name, PROJECT)
    assert control_plane.lookups == 0  # refused before the seam answered


def test_a_cluster_name_for_a_node_pool_rpc_is_refused() -> None:
    with pytest.raises(InvalidArgument):
        gke_contract.http_request("GetNodePool", GetNodePoolRequest(name=CLUSTER_PATH))


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"nodePool": {"initialNodeCount": "three"}}, "node_pool.initial_node_count", "TYPE_INT32"),
        ({"nodePool": {"config": {"spot": "yes"}}}, "node_pool.config.spot", "TYPE_BOOL"),
        ({"nodePool": {"machineType": "ct6e"}}, "node_pool.machine_type", "Unknown name"),
        ({"nodePool": {"status": "HEALTHY"}}, "node_pool.status", "TYPE_ENUM"),
    ],
)
def test_a_node_pool_create_body_outside_the_schema_is_refused(
    body: dict, field: str, words: str
) -> None:
    """nodePools.create takes a CreateNodePoolRequest: a misfit is Google's 400 naming it."""
    request = CreateNodePoolRequest(parent=CLUSTER_PATH, node_pool=NodePool(name="tpu-pool-0"))
    http_method, target, _ = gke_contract.http_request("CreateNodePool", request)
    with pytest.raises(InvalidArgument, match=words) as refused:
        gke_contract.refuse_request(http_method, target, json.dumps(body).encode())
    assert refused.value.details[0]["fieldViolations"][0]["field"] == field


def test_the_librarys_own_create_body_fits() -> None:
    pool = NodePool(name="tpu-pool-0", initial_node_count=2, config={"spot": True})
    request = CreateNodePoolRequest(parent=CLUSTER_PATH, node_pool=pool)
    gke_contract.refuse_request(*gke_contract.http_request("CreateNodePool", request))


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ({"name": "tpu-pool-0", "initialNodeCount": "2"}, "TYPE_INT32"),
        ({"name": "tpu-pool-0", "config": {"spot": "true"}}, "TYPE_BOOL"),
        ({"name": "tpu-pool-0", "status": "HEALTHY"}, "TYPE_ENUM"),
        ({"name": "tpu-pool-0", "nodeCount": 2}, "unknown field 'node_count'"),
        ({"name": "tpu-pool-0", "selfLink": POOL_PATH}, "a link outside"),
    ],
)
def test_a_node_pool_answer_outside_the_schema_is_a_sandbox_bug(answer: dict, words: str) -> None:
    with pytest.raises(SchemaMismatch, match=words):
        gke_contract.verify_answer("GET", f"/v1/{POOL_PATH}", answer)


def test_an_operation_whose_target_is_a_bare_name_is_a_sandbox_bug() -> None:
    """The seam's answer passes through the contract: a bare resource name as targetLink."""
    bare = Operation(name="operation-1", status="RUNNING", target_link=CLUSTER_PATH)
    with pytest.raises(SchemaMismatch, match="a link outside"):
        gke_contract.checked_rpc(
            "DeleteCluster", DeleteClusterRequest(name=CLUSTER_PATH), lambda: bare
        )


def test_the_process_harness_seam_refuses_a_name_in_the_wrong_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Airflow processes' GKEHook.get_cluster (sandbox/processes/site/sitecustomize.py)
    holds its request to the contract too, before it reads the fake cloud."""
    path = Path(gke_contract.__file__).parent / "processes" / "site" / "sitecustomize.py"
    spec = importlib.util.spec_from_file_location("seam_under_test", path)
    assert spec is not None and spec.loader is not None
    seam = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(seam)
    seam_file = tmp_path / "seam.json"
    seam_file.write_text(json.dumps({"state_file": str(tmp_path / "absent.json")}))
    monkeypatch.setattr(seam, "SEAM_FILE", str(seam_file))
    with pytest.raises(InvalidArgument, match="projects/\\*/locations/\\*/clusters/\\*"):
        seam._get_cluster(hook(), f"{CLUSTER}/nodePools/x", PROJECT)
