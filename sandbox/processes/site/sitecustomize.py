"""The GKE seam, loaded by every Airflow process of the process harness (this folder is first on
their PYTHONPATH): the cluster record (endpoint + CA) comes from the sandbox's fake cloud and Google
credentials yield the Kubernetes emulator's token. Everything after it is real loopback traffic.
For `make demo-ui` it also gives the DAG's Params the sandbox's settings as defaults, so the
trigger form works as it is.

Nothing is imported at interpreter start: the hook modules (and the Params module) are patched
right after they are imported, so processes that never touch GKE pay nothing. The seam's facts
come from the JSON file named by $TPU_RL_SANDBOX_SEAM (written by sandbox/processes/deployment.py).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

SEAM_FILE = os.environ.get("TPU_RL_SANDBOX_SEAM")
GKE_HOOKS = "airflow.providers.google.cloud.hooks.kubernetes_engine"
BASE_HOOK = "airflow.providers.google.common.hooks.base_google"
PARAMS = "tpu_rl.dag.params"
JANITOR_PARAMS = "tpu_rl.janitor.params"  # the janitor's form: the same project, region, bucket


def _seam() -> dict[str, Any]:
    return json.loads(Path(SEAM_FILE or "").read_text())


def _hold_if_asked(seam: dict[str, Any]) -> None:
    """Park the first task process of the run + task the seam's "hold" names for its seconds,
    leaving its pid in a marker file, so a test can kill it mid-task (retries pass through)."""
    hold = seam.get("hold") or {}
    run_id, task_id = (
        os.environ.get("AIRFLOW_CTX_DAG_RUN_ID"),
        os.environ.get("AIRFLOW_CTX_TASK_ID"),
    )
    if not hold or (run_id, task_id) != (hold["run_id"], hold["task_id"]):
        return
    marker = Path(SEAM_FILE or "").parent / f"held-{run_id}-{task_id}"
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    time.sleep(hold["seconds"])


def _get_cluster(hook: Any, name: str, project_id: str | None = None, **_: Any) -> Any:
    """GKEHook.get_cluster: RUNNING clusters of the fake cloud, served by the emulator; the
    clusters.get request and the answer held to container.v1 (sandbox/gke_contract.py)."""
    from google.cloud.container_v1.types import GetClusterRequest

    from sandbox import gke_contract

    seam = _seam()
    _hold_if_asked(seam)
    request = GetClusterRequest(name=gke_contract.cluster_path(hook, name, project_id))
    return gke_contract.checked_rpc("GetCluster", request, lambda: _cluster(seam, name))


def _cluster(seam: dict[str, Any], name: str) -> Any:
    """The fake cloud's cluster `name`, once the sandbox has provisioned it."""
    from google.api_core.exceptions import NotFound
    from google.cloud.container_v1.types import Cluster

    state_file = Path(seam["state_file"])
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    record = state.get("clusters", {}).get(name)
    if not record or record.get("status") != "RUNNING":
        raise NotFound(f"cluster {name} not found")
    pools = _wait_provisioned(name)
    return Cluster(
        name=name,
        endpoint=seam["kube_url"].removeprefix("https://"),
        master_auth={"cluster_ca_certificate": seam["ca_b64"]},
        status=Cluster.Status.RUNNING,
        node_pools=pools,
        resource_labels=record.get("labels") or {},
    )


def _wait_provisioned(name: str) -> list[dict[str, Any]]:
    """Until the sandbox has put the cluster's model (nodes, Kueue) in the emulator: the
    in-process sandbox does that inside get_cluster, the process harness beside it. Returns
    the cluster's node pools as the sandbox described them."""
    marker = Path(SEAM_FILE or "").parent / "provisioned.json"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            provisioned = json.loads(marker.read_text())
            if name in provisioned:
                return provisioned[name]
        except (FileNotFoundError, json.JSONDecodeError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"sandbox: cluster {name} is RUNNING but its model was not provisioned")


def _control_plane() -> Any:
    """The sandbox's GKE control plane over the fake cloud's state file."""
    saved = dict(os.environ)
    from sandbox.cloud import GkeControlPlane  # its conftest import rewrites os.environ

    os.environ.clear()
    os.environ.update(saved)
    seam = _seam()
    emulator = type("Emulator", (), {"url": seam["kube_url"], "ca_b64": seam["ca_b64"]})()
    return GkeControlPlane(emulator, Path(seam["state_file"]))


class _ClusterManager:
    """GKEHook.get_cluster_manager_client: list_clusters answered by the sandbox's control plane."""

    def list_clusters(self, parent: str | None = None, **_: Any) -> Any:
        return _control_plane().list_clusters(parent or "")


def _delete_cluster(hook: Any, name: str, project_id: str | None = None, **_: Any) -> Any:
    """GKEHook.delete_cluster: the cluster leaves the fake cloud's state at once (the sandbox
    then removes its nodes, sandbox/processes/emulators.py)."""
    return _control_plane().delete_cluster(hook, name, project_id)


def _credentials_and_project(hook: Any) -> tuple[Any, str]:
    """GoogleBaseHook.get_credentials_and_project_id: a token the emulator accepts."""
    import google.auth.credentials

    class EmulatorCredentials(google.auth.credentials.Credentials):
        @property
        def expired(self) -> bool:
            return self.token != _seam()["token"]

        def refresh(self, request: Any) -> None:
            self.token = _seam()["token"]

    return EmulatorCredentials(), _seam()["project"]


def _patch_param_defaults(module: Any, function: str) -> None:
    """The DAGs' Params start with the seam's form defaults where they share a name (none for
    the process scenarios): the post-training form's settings, the janitor's project, region
    and bucket."""
    params_of = getattr(module, function)

    def sandbox_params() -> dict[str, Any]:
        params = params_of()
        for name, value in _seam()["form_defaults"].items():
            if name in params:
                params[name].value = value
        return params

    setattr(module, function, sandbox_params)


def _patch(module: Any) -> None:
    if module.__name__ == GKE_HOOKS:
        module.GKEHook.get_cluster = _get_cluster
        module.GKEHook.get_cluster_manager_client = lambda hook, *a, **kw: _ClusterManager()
        module.GKEHook.delete_cluster = _delete_cluster
    elif module.__name__ == BASE_HOOK:
        module.GoogleBaseHook.get_credentials_and_project_id = _credentials_and_project
    elif module.__name__ == PARAMS and _seam()["form_defaults"]:
        _patch_param_defaults(module, "dag_params")
    elif module.__name__ == JANITOR_PARAMS and _seam()["form_defaults"]:
        _patch_param_defaults(module, "janitor_params")


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    """Finds the patched modules with the normal finders and patches them once executed."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in (GKE_HOOKS, BASE_HOOK, PARAMS, JANITOR_PARAMS):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module: Any) -> None:
            original(module)
            _patch(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if SEAM_FILE:
    sys.meta_path.insert(0, _PatchAfterImport())
