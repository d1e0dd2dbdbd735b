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
import re
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


# GKE waits this long for a static pool's instance group before it fails the create with the
# IGM's errors: "Google Compute Engine: Not all instances running in IGM after 35m4.03s.
# Expected 5, running 2, transitioning 3. Current errors: [GCE_STOCKOUT]: Instance '...'
# creation failed: The zone 'projects/.../zones/us-central1-c' does not have enough resources
# available to fulfill the request. '(resource type:compute)'." (akka/akka-core#32992,
# GoogleCloudPlatform/cluster-toolkit#6278, September 2026).
IGM_WAIT_S = 35 * 60.0
# terraform-provider-google's node pool create timeout when the pool sets none: 30 minutes up to
# v7.29 (resource_container_node_pool.go; 60 from v7.30.0, 2 hours from v7.42.0). The sandbox
# runs the oldest provider Cluster Toolkit's gke-node-pool admits (versions.tf: google-beta
# >= 7.24.0), where terraform gives up before GKE answers.
PROVIDER_CREATE_TIMEOUT_S = 30 * 60.0
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def duration_s(text: str) -> float:
    """A terraform duration ("45m", "1h30m") in seconds."""
    m = _DURATION.fullmatch(str(text).strip())
    if not m or not any(m.groups()):
        raise ValueError(f"not a terraform duration: {text!r}")
    h, mins, secs = (int(g or 0) for g in m.groups())
    return h * 3600.0 + mins * 60.0 + secs


def _go_duration(seconds: float) -> str:
    """Go's time.Duration.String of whole minutes ("30m0s", "1h0m0s")."""
    h, m = divmod(int(seconds // 60), 60)
    return f"{h}h{m}m0s" if h else f"{m}m0s"


def deploy_refusal(bp: dict[str, Any], path: str) -> str | None:
    """GKE's or terraform's answer when an expanded blueprint's static TPU pool has a
    stocked-out mode and zone at creation (the fake gcluster's deploy), or None when it gets its
    VMs. The pool waits on the simulated clock: GKE's instance group keeps asking for the VMs
    until IGM_WAIT_S, terraform until the pool's `timeout_create` (else the provider's default);
    a window that ends before both lets the pool stand. Whichever limit comes first answers:
    GKE with the IGM's error (GCE_STOCKOUT, or Compute Engine's CONDITION_NOT_MET for a
    reservation others hold), terraform with its timeout, which names no stockout
    (tpu_rl.cluster.capacity.CREATE_TIMEOUT_MARKERS). A flex-start pool is made with no node,
    so its deploy never stocks out."""
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
                if window is None:
                    continue
                timeout = settings.get("timeout_create")
                limit = duration_s(timeout) if timeout else PROVIDER_CREATE_TIMEOUT_S
                now = _clock(path)
                if window.end is not None and window.end < now + min(limit, IGM_WAIT_S):
                    continue  # the VMs come within both waits: the pool stands
                if limit <= IGM_WAIT_S:
                    return (
                        "Error waiting for creating GKE NodePool: timeout while waiting for "
                        "state to become 'DONE' (last state: 'RUNNING', timeout: "
                        f"{_go_duration(limit)})"
                    )
                hosts = int(settings["static_node_count"])
                cause = (
                    reservation_in_use(variables)
                    if window.kind == IN_USE
                    else "[GCE_STOCKOUT]: Instance creation failed: The zone "
                    f"'projects/{variables.get('project_id')}/zones/{zone}' does not have "
                    "enough resources available to fulfill the request. "
                    "'(resource type:compute)'."
                )
                return (
                    "Error waiting for creating GKE NodePool: Google Compute Engine: Not all "
                    f"instances running in IGM after {_go_duration(IGM_WAIT_S)}. Expected "
                    f"{hosts}, running 0, transitioning {hosts}. Current errors: {cause}"
                )
    return None


def _clock(path: str) -> float:
    return float(json.loads(Path(path).read_text()).get("clock", 0.0))


def reservation_in_use(variables: dict[str, Any]) -> str:
    """Compute Engine's answer when a specific reservation has no VM free for the request, as
    GKE's cluster autoscaler matches it (kubernetes/autoscaler, cluster-autoscaler/cloudprovider/
    gce/autoscaling_gce_client.go: isReservationCapacityExceeded, error code CONDITION_NOT_MET,
    RESERVATION_CAPACITY_EXCEEDED), as the IGM reports it for an instance."""
    return (
        "[CONDITION_NOT_MET]: Instance creation failed: Specified reservation "
        f"'{variables.get('reservation')}' does not have available resources for the request."
    )
