"""TPU capacity in the run's zone, read from the Compute Engine API: the v6e machine type offered
there, and the reservation (capacity=reservation) or the region's TPU quota (flex_start, spot).

Machine types: https://cloud.google.com/compute/docs/reference/rest/v1/machineTypes (get,
aggregatedList); reservations: .../v1/reservations (`specificReservation.count`, `inUseCount`,
`instanceProperties.machineType`); quotas: .../v1/regions/get (`quotas[]`: metric, limit,
usage). No API tells ahead whether flex-start or Spot capacity will arrive: GKE provisions it
when the pods ask (DESIGN section 7), so those modes are checked as far as quota goes.
"""

from __future__ import annotations

import time

from tpu_rl.cluster.tpu import hosts_per_slice
from tpu_rl.preflight import calendar
from tpu_rl.preflight.google_api import GoogleApi
from tpu_rl.preflight.result import CheckResult, failed, passed
from tpu_rl.settings.choices import Capacity, ClusterMode
from tpu_rl.settings.run_settings import RunSettings

COMPUTE = "compute.googleapis.com"
OFFERED, RESERVATION, QUOTA = "v6e in zone", "reservation", "tpu quota"
# Which of regions.get's `quotas[].metric` names count v6e chips was not checked against a live
# project (the quota docs name quotas, not these metrics): a metric whose name holds V6E counts
# (PREEMPTIBLE_ ones for Spot); when none does, the check says it could not tell and passes.
V6E_QUOTA = "V6E"


def _zones_with(api: GoogleApi, s: RunSettings, kind: str, name: str) -> list[str]:
    """The zones where Compute's aggregated list of `kind` (machineTypes, reservations) finds
    one called `name`."""
    answer = api.get(
        COMPUTE,
        f"/compute/v1/projects/{s.project}/aggregated/{kind}",
        {"filter": f'name = "{name}"'},
    )
    return sorted(
        scope.removeprefix("zones/")
        for scope, found in (answer.get("items") or {}).items()
        if found.get(kind)
    )


def _zones_offering(api: GoogleApi, s: RunSettings) -> list[str]:
    return _zones_with(api, s, "machineTypes", s.compute_type)


def check_offered(api: GoogleApi, s: RunSettings) -> list[CheckResult]:
    """The slice's machine type exists in the zone (a zone of the region may lack it)."""
    path = f"/compute/v1/projects/{s.project}/zones/{s.zone}/machineTypes/{s.compute_type}"
    machine = api.get_or_none(COMPUTE, path)
    if machine is None:
        elsewhere = [z for z in _zones_offering(api, s) if z.startswith(f"{s.region}-")]
        where = f"zones of {s.region} that offer it: {', '.join(elsewhere) or 'none'}"
        return [
            failed(
                OFFERED,
                f"{s.compute_type} is not offered in {s.zone} ({where})",
                f"set zone to one of {', '.join(elsewhere)}"
                if elsewhere
                else f"pick a region whose zones list it: gcloud compute machine-types list "
                f"--filter=name={s.compute_type} --project={s.project}",
            )
        ]
    return [passed(OFFERED, f"{machine.get('name', s.compute_type)} offered in {s.zone}")]


def _vms_needed(s: RunSettings) -> int:
    return hosts_per_slice(s.topology, s.compute_type) * s.cluster_nodepool_count


def check_capacity(api: GoogleApi, s: RunSettings) -> list[CheckResult]:
    """The reservation, the calendar reservation's window, or the TPU quota, as the run's
    capacity mode needs."""
    if s.capacity == Capacity.RESERVATION:
        return [_check_reservation(api, s)]
    if s.capacity == Capacity.CALENDAR:
        return [_check_calendar(api, s)]
    return [_check_quota(api, s)]


def _check_calendar(api: GoogleApi, s: RunSettings) -> CheckResult:
    """The future reservation is in calendar mode, and its window not over nor too short for
    one save (the run waits for its start in create_cluster)."""
    try:
        window = calendar.read_window(api, s)
    except calendar.CalendarError as err:
        return failed(RESERVATION, str(err), "name a calendar-mode future reservation of the zone")
    if problem := calendar.window_problem(window, s, time.time()):
        return failed(RESERVATION, problem, "request a new window, or another capacity mode")
    return passed(RESERVATION, f"{window.describe()}; the run waits for its start")


def _check_reservation(api: GoogleApi, s: RunSettings) -> CheckResult:
    describe = f"gcloud compute reservations list --project={s.project}"
    if not s.reservation:
        return passed(RESERVATION, "no reservation named: the existing pool's capacity is used")
    path = f"/compute/v1/projects/{s.project}/zones/{s.zone}/reservations/{s.reservation}"
    found = api.get_or_none(COMPUTE, path)
    if found is None:
        zones = _zones_holding(api, s)
        where = f"; it is in {', '.join(zones)}" if zones else ""
        return failed(
            RESERVATION,
            f"no reservation {s.reservation!r} in {s.zone} of {s.project}{where}",
            f"set reservation and zone to an existing v6e reservation's ({describe}), or "
            "capacity=flex_start/spot",
        )
    specific = found.get("specificReservation") or {}
    machine = (specific.get("instanceProperties") or {}).get("machineType", "")
    count, used = int(specific.get("count") or 0), int(specific.get("inUseCount") or 0)
    needed = _vms_needed(s)
    if machine != s.compute_type:
        return failed(
            RESERVATION,
            f"{s.reservation} reserves {machine or 'no machine type'}, the run needs "
            f"{s.compute_type}",
            f"name a {s.compute_type} reservation ({describe})",
        )
    if s.cluster_mode == ClusterMode.EXISTING:
        return passed(
            RESERVATION,
            f"{s.reservation} in {s.zone}: {count} x {machine}, {used} in use by the cluster",
        )
    if count - used < needed:
        return failed(
            RESERVATION,
            f"{s.reservation} in {s.zone} has {count - used} free of {count} {machine} VMs; the "
            f"run needs {needed} ({s.cluster_nodepool_count} x {s.topology})",
            "free the reservation's VMs (delete what uses them), resize it: gcloud compute "
            f"reservations update {s.reservation} --zone={s.zone} --vm-count={used + needed}, "
            "or use fewer slices",
        )
    return passed(
        RESERVATION,
        f"{s.reservation} in {s.zone}: {count - used} free of {count} {machine} VMs, "
        f"{needed} needed",
    )


def _zones_holding(api: GoogleApi, s: RunSettings) -> list[str]:
    """The zones where a reservation of that name is (reservations.aggregatedList)."""
    return _zones_with(api, s, "reservations", s.reservation)


def _check_quota(api: GoogleApi, s: RunSettings) -> CheckResult:
    region = api.get(COMPUTE, f"/compute/v1/projects/{s.project}/regions/{s.region}")
    preemptible = s.capacity == Capacity.SPOT
    quotas = [
        q
        for q in region.get("quotas") or []
        if V6E_QUOTA in str(q.get("metric", "")).upper()
        and str(q.get("metric", "")).upper().startswith("PREEMPTIBLE") == preemptible
    ]
    chips = s.chips * s.cluster_nodepool_count
    if not quotas:
        return passed(
            QUOTA,
            f"{s.region} lists no v6e quota metric; GKE checks quota when {s.capacity} nodes are "
            "requested (no API reports that capacity ahead)",
        )
    short = [q for q in quotas if float(q.get("limit", 0)) - float(q.get("usage", 0)) < chips]
    shown = ", ".join(
        f"{q['metric']} {float(q.get('usage', 0)):g}/{float(q.get('limit', 0)):g}" for q in quotas
    )
    if short:
        return failed(
            QUOTA,
            f"{s.region}: {shown}; the run needs {chips} chips free",
            "request more in the console: IAM & Admin > Quotas, filter on the metric "
            f"{short[0]['metric']} in {s.region} (or use capacity=reservation)",
        )
    return passed(
        QUOTA, f"{s.region}: {shown}; {chips} chips needed ({s.capacity} capacity is not promised)"
    )
