"""GKE flex-start's maximum run duration: a flex-start node lives at most its node pool's
`maxRunDurationSeconds` (seven days unless set: GKE's "About flex-start" page), then goes.

GKE's cluster autoscaler marks such a node with the label MaxRunDurationLabelKey (the run
duration in seconds) and the annotation InstanceTerminationAnnotationKey (the RFC3339 time its
VM is terminated). In the sandbox the autoscaler marks the flex-start nodes it creates
(autoscaler.py) and the Preemption machinery takes a node away when its time has come
(preemption.py, `Preemption.expire`): its pods end as in a graceful node shutdown, the Node is
deleted. The durations are simulated seconds; the annotation is wall-clock time, as every
timestamp the emulator writes (ledger.SimClock maps between the two).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sandbox.kube_logs import rfc3339nano

MAX_RUN_LABEL = "cloud.google.com/gke-max-run-duration-seconds"
TERMINATION_ANNOTATION = "node.gke.io/machine-termination-datetime"
DEFAULT_MAX_RUN_S = 7 * 24 * 3600  # GKE's default when maxRunDurationSeconds is not set
# No advance notice: GKE's flex-start and Compute Engine's run-duration pages document none
# (unlike a Spot VM's 30 s); the time is on the node from its creation instead.
NOTICE_S = 0.0


def mark(node: dict[str, Any], max_run_s: int, terminates: datetime) -> dict[str, Any]:
    """The node as GKE's cluster autoscaler labels and annotates a flex-start node."""
    meta = node["metadata"]
    meta["labels"] = {**(meta.get("labels") or {}), MAX_RUN_LABEL: str(int(max_run_s))}
    meta["annotations"] = {
        **(meta.get("annotations") or {}),
        TERMINATION_ANNOTATION: rfc3339nano(terminates),
    }
    return node


def termination(node: dict[str, Any]) -> datetime | None:
    """When the node's VM is terminated (wall clock, UTC); None: it has no run duration."""
    meta = node.get("metadata") or {}
    if MAX_RUN_LABEL not in (meta.get("labels") or {}):
        return None
    stamp = (meta.get("annotations") or {}).get(TERMINATION_ANNOTATION)
    return datetime.fromisoformat(stamp) if stamp else None
