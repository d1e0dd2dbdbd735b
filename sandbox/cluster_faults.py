"""An existing cluster changed for one preflight refusal, and put back: each function changes
the provisioned cluster in the emulator and returns what undoes it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sandbox.cluster_addons import CONTROLLERS, VERSIONS
from sandbox.kube_emulator import KubeEmulator

Undo = Callable[[], None]
KUEUE_NAMESPACE, KUEUE_DEPLOYMENT, _ = CONTROLLERS["kueue"]
TPU = "google.com/tpu"


def kueue_missing(emu: KubeEmulator) -> Undo:
    saved = emu.get("deployments", KUEUE_NAMESPACE, KUEUE_DEPLOYMENT)
    emu.delete("deployments", KUEUE_NAMESPACE, KUEUE_DEPLOYMENT)
    return lambda: emu.create({k: v for k, v in saved.items() if k != "status"})


def kueue_at(version: str) -> Callable[[KubeEmulator], Undo]:
    """Kueue's controller image at another version."""

    def change(emu: KubeEmulator) -> Undo:
        saved = emu.get("deployments", KUEUE_NAMESPACE, KUEUE_DEPLOYMENT)["spec"]
        spec = json.loads(json.dumps(saved).replace(f":{VERSIONS['kueue']}", f":{version}"))
        emu.patch("deployments", KUEUE_NAMESPACE, KUEUE_DEPLOYMENT, {"spec": spec})
        return lambda: emu.patch("deployments", KUEUE_NAMESPACE, KUEUE_DEPLOYMENT, {"spec": saved})

    return change


def _tpu_only(group: dict[str, Any]) -> dict[str, Any]:
    flavors = [
        {"name": f["name"], "resources": [r for r in f["resources"] if r["name"] == TPU]}
        for f in group["flavors"]
    ]
    return {**group, "coveredResources": [TPU], "flavors": flavors}


def queue_covers_tpu_only(emu: KubeEmulator) -> Undo:
    """The ClusterQueue as the tutorial's Kueue template makes it: google.com/tpu only."""
    (queue,) = emu.list("clusterqueues")
    name, groups = queue["metadata"]["name"], queue["spec"]["resourceGroups"]
    emu.patch("clusterqueues", "", name, {"spec": {"resourceGroups": [_tpu_only(groups[0])]}})
    return lambda: emu.patch("clusterqueues", "", name, {"spec": {"resourceGroups": groups}})


def autopilot(emu: KubeEmulator) -> Undo:
    emu.cluster.autopilot = True
    return lambda: setattr(emu.cluster, "autopilot", False)
