"""TPU capacity in the run's zone, read from the Compute Engine API: the slice's machine type
(its TPU generation's: tpu_rl.tpu) offered there, and the reservation (capacity=reservation) or
the region's quota of that generation (flex_start, spot).
Compute Engine is read through google.cloud.compute_v1's typed clients (MachineTypesClient,
ReservationsClient; tpu_rl.preflight.google_api), Cloud Quotas over REST.

Machine types: https://cloud.google.com/compute/docs/reference/rest/v1/machineTypes (get,
aggregatedList); reservations: .../v1/reservations (`specificReservation.count`, `inUseCount`,
`instanceProperties.machineType`). No API tells ahead whether flex-start or Spot capacity will
arrive: GKE provisions it when the pods ask ("Observe Scale-Up" in sandbox/vendor/cluster-toolkit/
consumption-options/dws-flex-start__gke-tpu-v6e__README.md), so those modes are checked as
far as quota goes. Every rung of the capacity ladder is checked (tpu_rl.cluster.ladder: a rung
is the run's settings with its mode and zone).

TPU quota: regions.get cannot show it (Compute v1's Quota.metric enum lists v4 and v5e TPU
metrics only: compute.v1 discovery document, schemas.Quota.properties.metric.enum). TPU quota is
read from the Cloud Quotas API (quotaInfos.get, https://docs.cloud.google.com/docs/quotas/
reference/rest/v1/projects.locations.services.quotaInfos/get: GET
/v1/projects/*/locations/global/services/compute.googleapis.com/quotaInfos/<quotaId>; the
QuotaInfo's `dimensionsInfos[]` carry `dimensions` {"region": ..., service dimensions such as
"tpu_family"}, `details.value` (the limit in effect) and `applicableLocations`; "If a dimension
does not appear in the map of dimensions, the dimensions info applies to all the dimension
values except for those that have another DimensionsInfo instance configured for the specific
value", .../rest/v1/projects.locations.services.quotaInfos#DimensionsInfo). A QuotaInfo has no
usage: the check compares the limit with the chips the slice needs.
Flex-start and Spot TPUs consume preemptible quota (Cloud TPU, "Request Cloud TPUs using
Flex-start": "ensure you have sufficient preemptible quota to use Flex-start").
Flex-start falls back to the on-demand quota only where the project has no preemptible
quota: Compute Engine's provisioning-models page, "When you create a Flex-start VM, preemptible
quota is consumed. If your project lacks preemptible quota, then standard quota is consumed"
(https://docs.cloud.google.com/compute/docs/instances/provisioning-models, as quoted in a public
TPU rig's request-quota.sh, searchable as `STD_QUOTA="TPU-V5P-per-project-region"`, read
2026-12-06). So a flex-start slice is judged by the preemptible quota whenever the project has
one (a limit above 0), and by the on-demand quota only when it has none; Spot by the
preemptible quota alone. v6e's preemptible quota id is PREEMPTIBLE-TPU-V6E-per-project-region
and its on-demand one the family quota TPUS-PER-TPU-FAMILY-per-project-region (dimension
tpu_family CT6E) (a public TPU rig, searchable as `GCE_SPOT_QUOTA_ID =
os.getenv("GCE_SPOT_QUOTA_ID", "PREEMPTIBLE-TPU-V6E-per-project-region")`). v5p has its own
pair, PREEMPTIBLE-TPU-V5P-per-project-region and the on-demand TPU-V5P-per-project-region, with
no tpu_family dimension ("v5p publishes both halves itself and is not in the family quota at
all", the same request-quota.sh, "All read off `gcloud quotas info` on 2026-08-11"). TPU7x's
preemptible quota is PREEMPTIBLE-TPU7X-per-project-region (a public MaxText TPU v7 quick start,
read off a project on 2026-07-30, searchable as `PREEMPTIBLE-TPU7X-per-project-region`; read
2026-12-06); no public id of its on-demand quota was found (its page sends to an account team:
https://docs.cloud.google.com/tpu/docs/tpu7x), so a TPU7x flex-start slice in a project without
preemptible quota is left to GKE, and the check says so.
Reserved capacity (reservation, calendar) needs no more quota.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from tpu_rl.cluster.ladder import at_rung, rungs
from tpu_rl.preflight import calendar_reservation
from tpu_rl.preflight.google_api import GoogleApi, read, read_or_none
from tpu_rl.preflight.result import CheckResult, failed, passed
from tpu_rl.settings.capacity_modes import Preflight, capacity_mode
from tpu_rl.settings.choices import ClusterMode
from tpu_rl.settings.fields import RunSettings

COMPUTE = "compute.googleapis.com"
CLOUD_QUOTAS = "cloudquotas.googleapis.com"
OFFERED, RESERVATION, QUOTA = "tpu in zone", "reservation", "tpu quota"
PREEMPTIBLE_V6E = "PREEMPTIBLE-TPU-V6E-per-project-region"
TPU_FAMILY = "TPUS-PER-TPU-FAMILY-per-project-region"
FAMILY_DIMENSION = "tpu_family"


@dataclass(frozen=True)
class TpuQuota:
    """A TPU generation's Cloud Quotas ids: the preemptible one (Spot, and flex-start) and the
    on-demand one flex-start falls back to where the project has no preemptible quota ("": no
    public id), with its tpu_family dimension when it is the family quota."""

    preemptible: str
    on_demand: str
    family: str = ""


# per generation (the module's docstring): v6e's on-demand is the family quota (CT6E)
TPU_QUOTAS = {
    "v6e": TpuQuota(PREEMPTIBLE_V6E, TPU_FAMILY, "CT6E"),
    "v5p": TpuQuota("PREEMPTIBLE-TPU-V5P-per-project-region", "TPU-V5P-per-project-region"),
    "tpu7x": TpuQuota("PREEMPTIBLE-TPU7X-per-project-region", ""),
}


def _each_rung(
    s: RunSettings, check: Callable[[RunSettings], list[CheckResult]]
) -> list[CheckResult]:
    """`check` on the settings of every rung of the run's ladder; on a ladder of more than one
    rung each result's name says its rung (`reservation (spot@us-east5-a)`)."""
    ladder = rungs(s)
    if len(ladder) == 1:
        return check(at_rung(s, ladder[0]))
    return [
        replace(r, name=f"{r.name} ({rung})") for rung in ladder for r in check(at_rung(s, rung))
    ]


def _zones_with(
    aggregated_list: Callable[..., Iterable[tuple[str, Any]]], request: Any, kind: str
) -> list[str]:
    """The zones of a Compute aggregated list (its pager's (scope, scoped list) pairs) whose
    scoped list holds any `kind` (machine_types, reservations); every page is read within
    `read`, so a later page's refusal reads as the first's."""
    pairs = read(lambda **call: list(aggregated_list(**call)), request)
    return sorted(scope.removeprefix("zones/") for scope, found in pairs if getattr(found, kind))


def _zones_offering(api: GoogleApi, s: RunSettings) -> list[str]:
    """The zones offering the slice's machine type (machineTypes.aggregatedList)."""
    from google.cloud import compute_v1

    request = compute_v1.AggregatedListMachineTypesRequest(
        project=s.project, filter=f'name = "{s.compute_type}"'
    )
    client = api.client(compute_v1.MachineTypesClient, COMPUTE)
    return _zones_with(client.aggregated_list, request, "machine_types")


def check_offered(api: GoogleApi, s: RunSettings) -> list[CheckResult]:
    """The slice's machine type exists in the zone of every rung (a zone of the region may
    lack it)."""
    return _each_rung(s, lambda on: _check_offered(api, on))


def _check_offered(api: GoogleApi, s: RunSettings) -> list[CheckResult]:
    from google.cloud import compute_v1

    request = compute_v1.GetMachineTypeRequest(
        project=s.project, zone=s.zone, machine_type=s.compute_type
    )
    machine = read_or_none(api.client(compute_v1.MachineTypesClient, COMPUTE).get, request)
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
    return [passed(OFFERED, f"{machine.name or s.compute_type} offered in {s.zone}")]


def check_capacity(api: GoogleApi, s: RunSettings) -> list[CheckResult]:
    """The reservation, the calendar reservation's window, or the TPU quota, as each rung's
    capacity mode needs."""
    return _each_rung(s, lambda on: _check_rung_capacity(api, on))


def _check_rung_capacity(api: GoogleApi, s: RunSettings) -> list[CheckResult]:
    check = capacity_mode(s.capacity).preflight
    if check is Preflight.RESERVATION:
        return [_check_reservation(api, s)]
    if check is Preflight.CALENDAR_WINDOW:
        return [_check_calendar(api, s)]
    return [_check_quota(api, s)]


def _check_calendar(api: GoogleApi, s: RunSettings) -> CheckResult:
    """The future reservation is in calendar mode, and its window not over nor too short for
    one save (the run waits for its start in create_cluster)."""
    try:
        window = calendar_reservation.read_window(api, s)
    except calendar_reservation.CalendarError as err:
        return failed(RESERVATION, str(err), "name a calendar-mode future reservation of the zone")
    if problem := calendar_reservation.window_problem(window, s, time.time()):
        return failed(RESERVATION, problem, "request a new window, or another capacity mode")
    if window.reservation is None:
        pool = (
            f"the TPU pool consumes the reservation Compute Engine makes at the start "
            f"({window.name_prefix}-date-####), found by create_cluster then"
        )
    else:
        pool = f"the TPU pool consumes its reservation {window.reservation}"
    return passed(RESERVATION, f"{window.describe()}; the run waits for its start; {pool}")


def _check_reservation(api: GoogleApi, s: RunSettings) -> CheckResult:
    describe = f"gcloud compute reservations list --project={s.project}"
    if not s.reservation:
        return passed(RESERVATION, "no reservation named: the existing pool's capacity is used")
    from google.cloud import compute_v1

    request = compute_v1.GetReservationRequest(
        project=s.project, zone=s.zone, reservation=s.reservation
    )
    found = read_or_none(api.client(compute_v1.ReservationsClient, COMPUTE).get, request)
    if found is None:
        zones = _zones_holding(api, s)
        where = f"; it is in {', '.join(zones)}" if zones else ""
        return failed(
            RESERVATION,
            f"no reservation {s.reservation!r} in {s.zone} of {s.project}{where}",
            f"set reservation and zone to an existing {s.compute_type} reservation's "
            f"({describe}), or "
            "capacity=flex_start/spot",
        )
    specific = found.specific_reservation
    machine = specific.instance_properties.machine_type
    count, used = int(specific.count), int(specific.in_use_count)
    needed = s.slices.hosts
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
    from google.cloud import compute_v1

    request = compute_v1.AggregatedListReservationsRequest(
        project=s.project, filter=f'name = "{s.reservation}"'
    )
    client = api.client(compute_v1.ReservationsClient, COMPUTE)
    return _zones_with(client.aggregated_list, request, "reservations")


def _quota_limit(api: GoogleApi, s: RunSettings, quota_id: str, family: str) -> float | None:
    """The limit in effect of Cloud Quotas' `quota_id` for the run's region and TPU family:
    the most specific dimensionsInfo (region and family, then either, then the default); None
    when the project has no such quota info. `family`: the tpu_family of a family quota ("" for
    a generation's own)."""
    # REST: no lock pins google-cloud-quotas, Cloud Quotas' typed client
    info = api.get_or_none(
        CLOUD_QUOTAS,
        f"/v1/projects/{s.project}/locations/global/services/{COMPUTE}/quotaInfos/{quota_id}",
    )
    if info is None:
        return None

    def fits(dims: dict[str, str]) -> bool:
        return dims.get("region", s.region) == s.region and dims.get(FAMILY_DIMENSION, family) in (
            family,
            "",
        )

    candidates = [d for d in info.get("dimensionsInfos") or [] if fits(d.get("dimensions") or {})]
    if not candidates:
        return None
    best = max(candidates, key=lambda d: len(d.get("dimensions") or {}))
    return float((best.get("details") or {}).get("value") or 0)


def _shown(quota_id: str, limit: float | None) -> str:
    return f"{quota_id} {'not listed' if limit is None else f'limit {limit:g}'}"


def _fits(limit: float | None, chips: int) -> bool:
    """A limit in effect holds `chips` (a negative value is Cloud Quotas' unlimited)."""
    return limit is not None and (limit < 0 or limit >= chips)


def _check_quota(api: GoogleApi, s: RunSettings) -> CheckResult:
    """The quota of its TPU generation the rung's VMs consume: the preemptible one (Spot; and
    flex-start), or for flex-start in a project with no preemptible quota, the on-demand one."""
    slices = s.slices
    chips, generation = slices.chips, slices.generation.name
    quota = TPU_QUOTAS.get(generation)
    if quota is None:
        return passed(
            QUOTA,
            f"{s.region}: no public Cloud Quotas id of {generation} is known to read; GKE checks "
            f"quota when the {chips}-chip {s.capacity} slice is requested",
        )
    preemptible = _quota_limit(api, s, quota.preemptible, "")
    consumed, limit, why = quota.preemptible, preemptible, "preemptible quota"
    falls_back = capacity_mode(s.capacity).preflight is Preflight.PREEMPTIBLE_ELSE_ON_DEMAND_QUOTA
    if falls_back and not preemptible:  # none, or a limit of 0
        if not quota.on_demand:
            return passed(
                QUOTA,
                f"{s.region}: {_shown(quota.preemptible, preemptible)}: flex-start then consumes "
                f"the on-demand quota, whose Cloud Quotas id for {generation} is not public; GKE "
                f"checks it when the {chips}-chip slice is requested",
            )
        consumed, why = quota.on_demand, "on-demand quota (no preemptible quota in the project)"
        limit = _quota_limit(api, s, quota.on_demand, quota.family)
    shown = _shown(consumed, limit)
    if _fits(limit, chips):
        return passed(
            QUOTA,
            f"{s.region}: {s.capacity} consumes {why}: {shown}; {chips} chips needed (quota "
            f"usage is not read: other VMs may hold some; {s.capacity} capacity is not promised)",
        )
    if limit is None:
        return passed(
            QUOTA,
            f"{s.region}: Cloud Quotas lists no {consumed} ({s.capacity} consumes {why}); GKE "
            f"checks quota when {s.capacity} nodes are requested",
        )
    return failed(
        QUOTA,
        f"{s.region}: {s.capacity} consumes {why}: {shown}; the {s.capacity} slice needs "
        f"{chips} chips",
        f"request more in the console: IAM & Admin > Quotas, filter on {consumed} in "
        f"{s.region} (or use capacity=reservation)",
    )
