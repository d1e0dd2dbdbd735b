"""The sandbox's seam in every Airflow process `make demo-ui` starts (on their PYTHONPATH only).

Python imports `sitecustomize` at start; this one patches, once their modules are imported,
what the in-process harness patches with mock: the GKE control plane (the cluster's endpoint and
CA are the Kubernetes API emulator's) and Google credentials (the emulator's token). It also
gives tpu_rl_post_training's Params the sandbox's settings as defaults, so the trigger form works
as it is and polls every second. Everything it needs is in the JSON file $TPU_RL_DEMO_SEAM.
Nothing here is imported by product code or by `make test`'s in-process runs.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

READY_WAIT_S = 60  # how long get_cluster waits for the sandbox to provision a RUNNING cluster


def _seam() -> dict[str, Any]:
    return json.loads(Path(os.environ["TPU_RL_DEMO_SEAM"]).read_text())


def _patch_gke_hook(module: ModuleType) -> None:
    """GKEHook.get_cluster answers from the fake cloud's state: the emulator's URL and CA."""
    from google.api_core.exceptions import NotFound
    from google.cloud.container_v1.types import Cluster

    def get_cluster(hook: Any, name: str, project_id: str | None = None, **_: Any) -> Cluster:
        """The cluster once the sandbox's process provisioned it (tests/demo_ui/provision.py)."""
        seam = _seam()
        state_file = Path(seam["state_file"])
        state = json.loads(state_file.read_text()) if state_file.exists() else {}
        record = state.get("clusters", {}).get(name)
        if not record or record.get("status") != "RUNNING":
            raise NotFound(f"cluster {name} not found")
        ready, deadline = Path(seam["cluster_ready_file"]), time.monotonic() + READY_WAIT_S
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.1)  # the sandbox's process is putting the cluster's nodes in place
        return Cluster(
            name=name,
            endpoint=seam["kube_url"].removeprefix("https://"),
            master_auth={"cluster_ca_certificate": seam["kube_ca_b64"]},
            status=Cluster.Status.RUNNING,
        )

    module.GKEHook.get_cluster = get_cluster


def _patch_google_credentials(module: ModuleType) -> None:
    """Every Google hook gets credentials whose token is the emulator's."""
    import google.auth.credentials

    class EmulatorCredentials(google.auth.credentials.Credentials):
        def refresh(self, request: Any) -> None:
            self.token = _seam()["kube_token"]

    def get_credentials_and_project_id(hook: Any) -> tuple[Any, str]:
        credentials = EmulatorCredentials()
        credentials.refresh(None)
        return credentials, _seam()["project"]

    module.GoogleBaseHook.get_credentials_and_project_id = get_credentials_and_project_id


def _patch_param_defaults(module: ModuleType) -> None:
    """tpu_rl_post_training's form starts with the sandbox's settings."""
    dag_params = module.dag_params

    def sandbox_dag_params() -> dict[str, Any]:
        params = dag_params()
        for name, value in _seam()["form_defaults"].items():
            params[name].value = value
        return params

    module.dag_params = sandbox_dag_params


PATCHES: dict[str, Callable[[ModuleType], None]] = {
    "airflow.providers.google.cloud.hooks.kubernetes_engine": _patch_gke_hook,
    "airflow.providers.google.common.hooks.base_google": _patch_google_credentials,
    "tpu_rl.settings.params": _patch_param_defaults,
}


class _PatchAfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the named modules with the other finders and patches them once executed."""

    def __init__(self) -> None:
        self.loaders: dict[str, importlib.abc.Loader] = {}

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in PATCHES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        self.loaders[name] = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec: Any) -> ModuleType | None:
        return self.loaders[spec.name].create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        loader = self.loaders[module.__name__]
        module.__loader__ = module.__spec__.loader = (
            loader  # the module looks as if never found here
        )
        loader.exec_module(module)
        PATCHES[module.__name__](module)


if os.environ.get("TPU_RL_DEMO_SEAM"):
    sys.meta_path.insert(0, _PatchAfterImport())
