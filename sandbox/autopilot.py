"""An Autopilot cluster as the sandbox shows it: the Container API's `autopilot.enabled`, and GKE
Warden refusing pods on the host network.

Warden's answer is GKE's (issues quoting it: DataDog/helm-charts#1375,
GoogleCloudPlatform/gcs-fuse-csi-driver#530). Only Pods are checked here; GKE's Warden checks
workload controllers' pod templates too (approximated: a Job's pods fail to be created).
"""

from __future__ import annotations

import json
from typing import Any

from sandbox.kube_state import ApiError

AUTOPILOT_VAR = "autopilot"  # an existing cluster's var (Sandbox.up(existing_cluster_vars=...))
WARDEN = "warden-validating.common-webhooks.networking.gke.io"


def is_autopilot(variables: dict[str, Any]) -> bool:
    return bool(variables.get(AUTOPILOT_VAR))


def warden(resource: Any, obj: dict[str, Any]) -> None:
    """GKE Warden's autogke-disallow-hostnamespaces constraint, at pod admission."""
    if resource.kind != "Pod" or not (obj.get("spec") or {}).get("hostNetwork"):
        return
    details = {
        "[denied by autogke-disallow-hostnamespaces]": [
            "enabling hostNetwork is not allowed in Autopilot."
        ]
    }
    raise ApiError(
        400,
        f'admission webhook "{WARDEN}" denied the request: GKE Warden rejected the request '
        "because it violates one or more constraints.\nViolations details: "
        f"{json.dumps(details)}",
        reason="BadRequest",
    )
