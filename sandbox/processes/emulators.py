"""The sandbox the Airflow processes talk to: Kubernetes emulator + its controller, GCS emulator,
the Cluster Toolkit bundle server, and the files the fake cloud and the GKE seam read.

It runs in the test process; the Airflow processes reach it on loopback and through the env
`environment()` returns.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.cloud import (
    SANDBOX_BIN,
    BundleServer,
    GcsEmulator,
    GkeControlPlane,
    make_bundle,
    sandbox_env,
)
from sandbox.cluster_addons import node_pools
from sandbox.controller import Controller, Scenario
from sandbox.google_apis import GoogleApisEmulator
from sandbox.harness import HF_TOKEN, MANAGED_LABEL, SETTINGS
from sandbox.kube_emulator import KubeEmulator, running_emulator
from sandbox.paths import BLUEPRINT_FIXTURES

HERE = Path(__file__).parent
GCLUSTER_VERSION = "v1.103.0"
PROVISIONED = "provisioned.json"  # beside the seam file: clusters whose model is in the emulator


def holding_bundle() -> bytes:
    """The release bundle with gcluster_hold.py as `gcluster` (see that file)."""
    example = "examples/gke-tpu-v6e/"
    return make_bundle(
        {
            "gcluster": ((HERE / "gcluster_hold.py").read_bytes(), 0o755),
            **{
                example + name: ((BLUEPRINT_FIXTURES / name).read_bytes(), 0o644)
                for name in ("gke-tpu-v6e-advanced.yaml", "kueue-configuration.yaml.tftpl")
            },
        }
    )


@dataclass
class ProcessSandbox:
    """Handles a scenario uses: the emulators, the controller and the fake cloud's files."""

    tmp: Path
    emu: KubeEmulator
    gcs: GcsEmulator
    controller: Controller
    env: dict[str, str]
    google: GoogleApisEmulator  # the project's and Hugging Face's answers to preflight

    @property
    def state_file(self) -> Path:
        return Path(self.env["FAKE_CLOUD_STATE"])

    @property
    def gcluster_control(self) -> Path:
        return Path(self.env["FAKE_GCLUSTER_CONTROL"])

    def clusters(self) -> dict[str, Any]:
        return (
            json.loads(self.state_file.read_text()).get("clusters", {})
            if self.state_file.exists()
            else {}
        )

    def calls(self) -> list[dict[str, Any]]:
        log = Path(self.env["FAKE_CLOUD_LOG"])
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    def deploy_pids(self) -> list[int]:
        """Pids of every `gcluster deploy` started so far."""
        folder = self.gcluster_control.parent / "deploy-pids"
        return sorted(int(p.name) for p in folder.iterdir()) if folder.exists() else []

    def hold_deploy(self, seconds: float) -> None:
        self.gcluster_control.write_text(json.dumps({"deploy_hold_seconds": seconds}))

    def nodes(self) -> list[str]:
        return [node["metadata"]["name"] for node in self.emu.list("nodes")]

    def leftovers(self, run_label: str) -> list[str]:
        """Objects of this run (pods included) that still exist."""
        selector = f"{MANAGED_LABEL},tpu-rl.dev/run={run_label}"
        return [
            f"{plural}/{obj['metadata']['name']}"
            for plural in ("jobs", "jobsets", "secrets", "pods")
            for obj in self.emu.list(plural, label_selector=selector)
        ]

    def hold_task(self, run_id: str, task_id: str, seconds: float) -> Path:
        """The GKE seam parks that task's first process; returns the marker holding its pid."""
        seam = Path(self.env["TPU_RL_SANDBOX_SEAM"])
        facts = json.loads(seam.read_text())
        facts["hold"] = {"run_id": run_id, "task_id": task_id, "seconds": seconds}
        seam.write_text(json.dumps(facts))
        return seam.parent / f"held-{run_id}-{task_id}"

    def use(self, scenario: Scenario) -> None:
        """Pods created from now on follow this scenario."""
        self.controller.scenario = scenario


def _provision_running_clusters(
    emu: KubeEmulator, state_file: Path, marker: Path, stop: threading.Event
) -> None:
    """What the in-process sandbox does in get_cluster and as time passes (GkeControlPlane
    get_cluster and sync), for the Airflow processes: once the fake gcluster records a cluster
    RUNNING, its model (nodes, service accounts, Kueue from the deployed blueprint) is put in the
    emulator, then the cluster is named in `marker` with its node pools (as the Container API
    describes them), which the seam's get_cluster waits for; when that cluster leaves the fake
    cloud (destroyed, or deleted by GKE), its nodes go with it. The runs' clusters are alike:
    one model at a time serves every RUNNING cluster."""
    served: dict[str, list] = {}
    while not stop.wait(0.02):
        try:
            clusters = json.loads(state_file.read_text()).get("clusters", {})
        except (FileNotFoundError, json.JSONDecodeError):  # not yet, or being rewritten
            continue
        running = sorted(n for n, r in clusters.items() if r.get("status") == "RUNNING")
        model = emu.cluster
        if model is not None and model.running and model.name not in running:
            model.running = False
            for node in emu.list("nodes"):
                emu.delete("nodes", "", node["metadata"]["name"])
        if running and (emu.cluster is None or not emu.cluster.running):
            GkeControlPlane.model(running[0], clusters[running[0]]).provision(emu)
        if running != list(served):
            served = {name: node_pools(emu.cluster) for name in running}
            marker.write_text(json.dumps(served))


@contextlib.contextmanager
def running_sandbox(
    tmp: Path, time_scale: float = 0.001, form_defaults: dict[str, Any] | None = None
) -> Iterator[ProcessSandbox]:
    """Everything started, its environment for the Airflow processes; all stopped on exit.
    `form_defaults`: the values the seam gives the DAG's Params (the trigger form's defaults)."""
    tmp.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        bundles = BundleServer()
        stack.callback(bundles.close)
        gcs = GcsEmulator()
        gcs.location = SETTINGS["region"]
        stack.callback(gcs.stop)
        google = GoogleApisEmulator()  # preflight's reads (sandbox/project_facts.py)
        stack.callback(google.stop)
        emu = stack.enter_context(running_emulator())
        from tpu_rl.cluster import blueprint

        bundles.files[f"/mirror/{GCLUSTER_VERSION}/{blueprint.bundle_name()}"] = holding_bundle()
        seam = tmp / "gke-seam.json"
        seam.write_text(
            json.dumps(
                {
                    "kube_url": emu.url,
                    "ca_b64": emu.ca_b64,
                    "token": emu.token,
                    "state_file": str(tmp / "cloud.json"),
                    "project": SETTINGS["project"],
                    "form_defaults": form_defaults or {},
                }
            )
        )
        env = {
            **sandbox_env(tmp, bundles.url, gcs.host),
            "TPU_RL_SANDBOX_SEAM": str(seam),
            "FAKE_GCLUSTER_CONTROL": str(tmp / "gcluster-control.json"),
            "FAKE_GCLUSTER_REAL": str(SANDBOX_BIN / "gcluster"),
            "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT": json.dumps(
                {"conn_type": "google_cloud_platform", "extra": {"project": SETTINGS["project"]}}
            ),
            "AIRFLOW_CONN_HUGGINGFACE_DEFAULT": json.dumps(
                {"conn_type": "generic", "password": HF_TOKEN}
            ),
            "TPU_RL_API_ENDPOINTS": json.dumps(google.endpoints()),
        }
        env["PATH"] = f"{SANDBOX_BIN}:{Path(sys.executable).parent}:/usr/bin:/bin"
        gcs.gate.roles_of = lambda principal: (
            emu.cluster.roles_of(principal) if emu.cluster else set()
        )
        google.facts.account_roles = lambda: emu.cluster.roles if emu.cluster else {}
        stop = threading.Event()
        provisioner = threading.Thread(
            target=_provision_running_clusters,
            args=(emu, tmp / "cloud.json", tmp / PROVISIONED, stop),
            daemon=True,
        )
        provisioner.start()
        stack.callback(provisioner.join)
        stack.callback(stop.set)
        controller = stack.enter_context(Controller(emu, Scenario(), time_scale=time_scale))
        yield ProcessSandbox(tmp, emu, gcs, controller, env, google)
