"""TPU capacity per zone and per mode on the simulated clock: stockout windows.

The fake gcluster (a subprocess) reads them from the file `$FAKE_CLOUD_CAPACITY`, with the
simulated time the harness writes there at every reconcile: a TPU node pool whose capacity mode
and zone are stocked out when it is created fails the deploy with GKE's own words, as a static
Spot or reservation pool does ("Node pool creation fails due to resource availability",
https://cloud.google.com/kubernetes-engine/docs/troubleshooting/node-pools).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ENV = "FAKE_CLOUD_CAPACITY"
NODE_POOL = "modules/compute/gke-node-pool"


# a Stockout's kind: the zone has no VMs of the mode, or the run's specific reservation is
# used by others
STOCKOUT, IN_USE = "stockout", "in_use"


@dataclass(frozen=True)
class Stockout:
    """No `capacity` VMs in `zone` from `start` to `end` (simulated seconds; end None: never
    back); `kind` IN_USE: the zone may have VMs, but the run's reservation has none free."""

    capacity: str
    zone: str
    start: float = 0.0
    end: float | None = None
    kind: str = STOCKOUT

    def covers(self, capacity: str, zone: str, now: float) -> bool:
        end = math.inf if self.end is None else self.end
        return (self.capacity, self.zone) == (capacity, zone) and self.start <= now < end


class ZoneCapacity:
    """The stockout windows, written with the simulated time for the fake gcluster to read."""

    def __init__(self, path: Path, clock: Callable[[], float]) -> None:
        self.path, self.clock = path, clock
        self.stockouts: list[Stockout] = []
        self._written: frozenset[tuple[str, str]] | None = None
        path.parent.mkdir(parents=True, exist_ok=True)
        self.reconcile()

    def stock_out(
        self,
        capacity: str,
        zone: str,
        start: float = 0.0,
        end: float | None = None,
        kind: str = STOCKOUT,
    ) -> None:
        self.stockouts.append(Stockout(capacity, zone, start, end, kind))
        self._written = None
        self.reconcile()

    def reservation_in_use(self, zone: str, start: float = 0.0, end: float | None = None) -> None:
        """Other VMs (another team's, another project's) hold the run's specific reservation."""
        self.stock_out("reservation", zone, start, end, IN_USE)

    def reconcile(self) -> None:
        """Write the windows and the time (atomically: gcluster may be reading) when what is
        stocked out changed since the last write: at the file's time and now, every window
        covers the same (mode, zone) pairs, so readers get today's answer without a write at
        each of the controller's ticks (100 a second)."""
        now = self.clock()
        covered = frozenset(
            (s.capacity, s.zone) for s in self.stockouts if s.covers(s.capacity, s.zone, now)
        )
        if covered == self._written:
            return
        data = {"clock": now, "stockouts": [asdict(s) for s in self.stockouts]}
        partial = self.path.with_suffix(".tmp")
        partial.write_text(json.dumps(data))
        partial.replace(self.path)
        self._written = covered


def stocked_out(path: str, capacity: str, zone: str) -> Stockout | None:
    """The file's window covering `capacity` in `zone` at the file's time (the fake gcluster's
    question; None without a file)."""
    file = Path(path)
    if not path or not file.is_file():
        return None
    data = json.loads(file.read_text())
    windows = [Stockout(**s) for s in data.get("stockouts") or []]
    return next((w for w in windows if w.covers(capacity, zone, data.get("clock", 0.0))), None)


def pool_mode(settings: dict[str, Any], variables: dict[str, Any]) -> str:
    """A TPU pool's capacity mode, from its gke-node-pool settings."""

    def value(v: Any) -> Any:
        return variables.get(v[7:-1]) if str(v).startswith("$(vars.") else v

    if value(settings.get("enable_flex_start")) is True:
        return "flex_start"
    return "spot" if value(settings.get("spot")) is True else "reservation"


def deploy_refusal(bp: dict[str, Any], path: str) -> str | None:
    """GKE's answer when an expanded blueprint's static TPU pool has a stocked-out mode and zone
    at creation (the fake gcluster's deploy). The words are Compute Engine's and GKE's documented
    ones ("Troubleshooting resource availability errors",
    https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-resource-availability;
    https://cloud.google.com/kubernetes-engine/docs/troubleshooting/node-pools, "Node pool
    creation fails due to resource availability"); the terraform provider's prefix is
    approximated. A flex-start pool is made with no node, so its deploy never stocks out."""
    variables = bp["vars"]
    for group in bp["deployment_groups"]:
        for module in group.get("modules") or []:
            settings = module.get("settings") or {}
            if module.get("source") != NODE_POOL or not settings.get("static_node_count"):
                continue
            zones = [
                variables.get(z[7:-1], z) if str(z).startswith("$(vars.") else z
                for z in settings.get("zones") or [variables.get("zone")]
            ]
            mode = pool_mode(settings, variables)
            for zone in zones:
                window = stocked_out(path, mode, zone)
                if window is not None and window.kind == IN_USE:
                    return reservation_in_use(variables)
                if window is not None:
                    return (
                        "Error waiting for creating GKE NodePool: ZONE_RESOURCE_POOL_EXHAUSTED: "
                        f"The zone 'projects/{variables.get('project_id')}/zones/{zone}' does "
                        "not have enough resources available to fulfill the request. Try a "
                        "different zone, or try again later."
                    )
    return None


def reservation_in_use(variables: dict[str, Any]) -> str:
    """Compute Engine's answer when a specific reservation has no VM free for the request, as
    GKE's cluster autoscaler matches it (kubernetes/autoscaler, cluster-autoscaler/cloudprovider/
    gce/autoscaling_gce_client.go: isReservationCapacityExceeded, error code CONDITION_NOT_MET,
    RESERVATION_CAPACITY_EXCEEDED); the terraform provider's prefix is approximated."""
    return (
        "Error waiting for creating GKE NodePool: CONDITION_NOT_MET: Specified reservation "
        f"'{variables.get('reservation')}' does not have available resources for the request."
    )
