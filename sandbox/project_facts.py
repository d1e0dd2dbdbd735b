"""What the sandbox's Google project, registries and Hugging Face Hub hold, and how their read
APIs answer (sandbox/google_apis.py serves them): the happy path by default; a test
changes one fact to make one refusal.

Answers follow the real APIs' shapes: Google's JSON errors (https://cloud.google.com/apis/design
/errors; Compute's `errors[].reason` notFound, a disabled API's 403 with the ErrorInfo reason
SERVICE_DISABLED), Service Usage services.batchGet, Resource Manager v3 testIamPermissions /
getIamPolicy, Compute machineTypes / reservations / regions, the Docker Registry V2 manifest
HEAD, and the Hub's whoami-v2 and auth-check (huggingface_hub 2.4 hf_api.py; refusals in the
X-Error-Code / X-Error-Message headers, utils/_http.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sandbox.project import HF_TOKEN, SETTINGS
from tpu_rl.settings.fields import TUTORIAL_MODEL
from tpu_rl.settings.images import (
    PATHWAYS_PROXY_SERVER_IMAGE,
    PATHWAYS_SERVER_IMAGE,
    TUTORIAL_IMAGE,
)

PROJECT_NUMBER = 123456789012
APIS = (
    "compute.googleapis.com",
    "container.googleapis.com",
    "storage.googleapis.com",
    "iam.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "cloudquotas.googleapis.com",
)
HF_USER = "sandbox-user"
Answer = tuple[int, dict[str, str], Any]  # status, headers, JSON body (None: empty)


def google_error(status: int, message: str, reason: str, detail: bool = False) -> Answer:
    """Google's JSON error; `detail`: the reason in an ErrorInfo (newer APIs), else errors[]."""
    names = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND"}
    error: dict[str, Any] = {"code": status, "message": message, "status": names.get(status, "")}
    if detail:
        error["details"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "googleapis.com",
            }
        ]
    else:
        error["errors"] = [{"message": message, "domain": "global", "reason": reason}]
    return status, {}, {"error": error}


def not_found(resource: str) -> Answer:
    return google_error(404, f"The resource '{resource}' was not found", "notFound")


@dataclass
class ProjectFacts:
    """The sandbox project as preflight reads it."""

    project: str = SETTINGS["project"]
    enabled_apis: set[str] = field(default_factory=lambda: set(APIS))
    denied_permissions: set[str] = field(default_factory=set)
    # zones offering each machine type (Cloud TPU's regions page lists v6e in us-east5-a and -b;
    # us-east5-c stands for a zone of the region without it; v5p in us-east5-a,
    # https://cloud.google.com/tpu/docs/regions-zones, read 2026-12-05). TPU7x's page lists no
    # zones ("To get access to TPU7x, contact your account team",
    # https://docs.cloud.google.com/tpu/docs/tpu7x): the sandbox project has it in us-east5-a.
    machine_zones: dict[str, set[str]] = field(
        default_factory=lambda: {
            "ct6e-standard-4t": {"us-east5-a", "us-east5-b"},
            "ct5p-hightpu-4t": {"us-east5-a"},
            "tpu7x-standard-4t": {"us-east5-a"},
        }
    )
    reservations: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {
            SETTINGS["reservation"]: {
                "zone": SETTINGS["zone"],
                "machineType": "ct6e-standard-4t",
                "count": 8,
                "inUseCount": 0,
            }
        }
    )
    # calendar-mode future reservations: name -> zone, startTime, endTime (RFC3339), and as a
    # test sets them `reservationName` or `namePrefix` (by default `reservationName` is the
    # future reservation's own name: a request carries one or the other) and
    # `procurementStatus` (APPROVED unless set)
    future_reservations: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Cloud Quotas quotaInfos of compute.googleapis.com: quotaId -> its dimensionsInfos as
    # (dimensions, limit). Defaults: Spot/flex-start v6e quota 64 chips in every region (Cloud
    # TPU, "Request Cloud TPUs using Flex-start": "The default preemptible quota for TPU v5e
    # and v6e is 64 cores"); the on-demand family quota 0 (no default grant: Cloud TPU quotas,
    # "On-demand ... All others: 0")
    quota_infos: dict[str, list[tuple[dict[str, str], int]]] = field(
        default_factory=lambda: {
            "PREEMPTIBLE-TPU-V6E-per-project-region": [({}, 64)],
            "TPUS-PER-TPU-FAMILY-per-project-region": [({}, 0)],
            # v5p's own pair (tpu_rl.preflight.capacity): 64 preemptible chips granted to the
            # sandbox project, none on demand
            "PREEMPTIBLE-TPU-V5P-per-project-region": [({}, 64)],
            "TPU-V5P-per-project-region": [({}, 0)],
            # TPU7x's preemptible quota (no public on-demand id): 64 chips granted here
            "PREEMPTIBLE-TPU7X-per-project-region": [({}, 64)],
        }
    )
    # regions.get's quotas: Compute v1's Quota.metric is an enum whose TPU metrics are v4's and
    # v5e's only (TPU_PODSLICE_V4, TPU_LITE_PODSLICE_V5, their PREEMPTIBLE_ ones: googleapiclient
    # discovery_cache/documents/compute.v1.json, schemas.Quota.properties.metric.enum), so a
    # region lists no v6e metric
    quotas: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {
            SETTINGS["region"]: [
                {"metric": "TPU_LITE_PODSLICE_V5", "limit": 64.0, "usage": 0.0},
                {"metric": "PREEMPTIBLE_TPU_LITE_PODSLICE_V5", "limit": 64.0, "usage": 0.0},
            ]
        }
    )
    images: set[str] = field(
        default_factory=lambda: {TUTORIAL_IMAGE, PATHWAYS_SERVER_IMAGE, PATHWAYS_PROXY_SERVER_IMAGE}
    )
    hf_tokens: dict[str, str] = field(default_factory=lambda: {HF_TOKEN: HF_USER})
    gated: set[str] = field(default_factory=lambda: {TUTORIAL_MODEL})
    licences: set[tuple[str, str]] = field(default_factory=lambda: {(HF_USER, TUTORIAL_MODEL)})
    # the project's IAM bindings of service accounts: {email: {role without "roles/"}}
    account_roles: Callable[[], dict[str, set[str]]] = dict

    def disabled(self, host: str) -> Answer | None:
        """The 403 an API answers while it is disabled in the project."""
        if host in self.enabled_apis:
            return None
        return google_error(
            403,
            f"{host.split('.')[0].title()} API has not been used in project {PROJECT_NUMBER} "
            f"before or it is disabled. Enable it by visiting https://console.developers.google"
            f".com/apis/api/{host}/overview?project={PROJECT_NUMBER} then retry.",
            "SERVICE_DISABLED",
            detail=True,
        )

    def services(self, names: list[str]) -> Answer:
        services = []
        for name in names:
            api = name.rsplit("/", 1)[-1]
            state = "ENABLED" if api in self.enabled_apis else "DISABLED"
            services.append(
                {
                    "name": f"projects/{PROJECT_NUMBER}/services/{api}",
                    "config": {"name": api},
                    "state": state,
                    "parent": f"projects/{PROJECT_NUMBER}",
                }
            )
        return 200, {}, {"services": services}

    def test_permissions(self, asked: list[str]) -> Answer:
        granted = [p for p in asked if p not in self.denied_permissions]
        return 200, {}, ({"permissions": granted} if granted else {})

    def iam_policy(self) -> Answer:
        by_role: dict[str, list[str]] = {}
        for email, roles in self.account_roles().items():
            for role in roles:
                by_role.setdefault(f"roles/{role}", []).append(f"serviceAccount:{email}")
        bindings = [{"role": r, "members": sorted(m)} for r, m in sorted(by_role.items())]
        return 200, {}, {"version": 1, "etag": "BwYsandbox=", "bindings": bindings}

    def project_resource(self) -> Answer:
        """Resource Manager v3 projects.get: `name` is projects/NUMBER (Project resource,
        https://cloud.google.com/resource-manager/reference/rest/v3/projects#Project)."""
        body = {"name": f"projects/{PROJECT_NUMBER}", "projectId": self.project}
        return 200, {}, {**body, "state": "ACTIVE", "parent": "organizations/1"}

    def machine_type(self, zone: str, name: str) -> Answer:
        if zone not in self.machine_zones.get(name, set()):
            return not_found(f"projects/{self.project}/zones/{zone}/machineTypes/{name}")
        return 200, {}, {"kind": "compute#machineType", "name": name, "zone": zone}

    def aggregated(self, kind: str, name: str) -> Answer:
        """machineTypes or reservations aggregatedList filtered on a name: {zones/z: found}."""
        if kind == "machineTypes":
            zones = self.machine_zones.get(name, set())
        else:
            zones = {r["zone"] for n, r in self.reservations.items() if n == name}
        items = {f"zones/{z}": {kind: [{"name": name, "zone": z}]} for z in sorted(zones)}
        return 200, {}, {"kind": f"compute#{kind[:-1]}AggregatedList", "items": items}

    def reservation(self, zone: str, name: str) -> Answer:
        found = self.reservations.get(name)
        if found is None or found["zone"] != zone:
            return not_found(f"projects/{self.project}/zones/{zone}/reservations/{name}")
        specific = {
            "count": str(found["count"]),
            "inUseCount": str(found["inUseCount"]),
            "instanceProperties": {"machineType": found["machineType"]},
        }
        return (
            200,
            {},
            {
                "kind": "compute#reservation",
                "name": name,
                "zone": zone,
                "specificReservation": specific,
                "status": "READY",
            },
        )

    def future_reservation(self, zone: str, name: str) -> Answer:
        """futureReservations.get, as Compute v1 answers a calendar-mode one: its timeWindow
        and reservationMode CALENDAR (the FutureReservation resource)."""
        found = self.future_reservations.get(name)
        if found is None or found["zone"] != zone:
            return not_found(f"projects/{self.project}/zones/{zone}/futureReservations/{name}")
        window = {"startTime": found["startTime"], "endTime": found["endTime"]}
        answer = {"kind": "compute#futureReservation", "name": name, "zone": zone}
        answer |= {"timeWindow": window, "reservationMode": "CALENDAR"}
        return 200, {}, {**answer, **self._delivery(zone, name, found)}

    def _delivery(self, zone: str, name: str, found: dict[str, Any]) -> dict[str, Any]:
        """A future reservation's naming and `status`, as Compute v1 has them (compute.v1
        discovery document, schemas.FutureReservation / FutureReservationStatus):
        `reservationName` or `namePrefix`; with a prefix, from the start a reservation
        `<namePrefix>-date-####` (here the start's YYYYMMDD and 0001) listed in
        `status.autoCreatedReservations` and made in the zone, of the request's VMs. An
        approved request reads FULFILLED from its start ("Future reservation is fulfilled
        completely")."""
        state = found.get("procurementStatus", "APPROVED")
        started = datetime.fromisoformat(found["startTime"]).timestamp() <= time.time()
        if state == "APPROVED" and started:
            state = "FULFILLED"
        status: dict[str, Any] = {"procurementStatus": state}
        prefix = found.get("namePrefix")
        if not prefix:
            return {"reservationName": found.get("reservationName", name), "status": status}
        if started and state == "FULFILLED":
            day = datetime.fromisoformat(found["startTime"]).strftime("%Y%m%d")
            made = f"{prefix}-{day}-0001"
            self.reservations.setdefault(
                made,
                {"zone": zone, "machineType": "ct6e-standard-4t", "count": 8, "inUseCount": 0},
            )
            status["autoCreatedReservations"] = [
                f"https://www.googleapis.com/compute/v1/projects/{self.project}/zones/{zone}/"
                f"reservations/{made}"
            ]
        return {"namePrefix": prefix, "status": status}

    def quota_info(self, quota_id: str) -> Answer:
        """Cloud Quotas quotaInfos.get of a compute.googleapis.com quota (QuotaInfo,
        https://docs.cloud.google.com/docs/quotas/reference/rest/v1/
        projects.locations.services.quotaInfos: quotaId, metric, service, containerType,
        dimensions, dimensionsInfos[] {dimensions, details.value (int64 as a string),
        applicableLocations}); 404 for an id the project does not have."""
        infos = self.quota_infos.get(quota_id)
        service = "compute.googleapis.com"
        name = f"projects/{PROJECT_NUMBER}/locations/global/services/{service}/quotaInfos/"
        if infos is None:
            return google_error(404, f"QuotaInfo {name}{quota_id} not found", "NOT_FOUND", True)
        family = "TPUS-PER-TPU-FAMILY" in quota_id
        metric = "tpus_per_tpu_family" if family else quota_id.split("-per-")[0].lower()
        answer = {
            "name": name + quota_id,
            "quotaId": quota_id,
            "metric": f"{service}/{metric.replace('-', '_')}",
            "service": service,
            "isPrecise": True,
            "containerType": "PROJECT",
            "dimensions": ["region", "tpu_family"] if family else ["region"],
            "dimensionsInfos": [
                {
                    "dimensions": dims,
                    "details": {"value": str(limit)},
                    "applicableLocations": [dims["region"]] if "region" in dims else [],
                }
                for dims, limit in infos
            ],
        }
        return 200, {}, answer

    def region(self, region: str) -> Answer:
        return (
            200,
            {},
            {"kind": "compute#region", "name": region, "quotas": self.quotas.get(region, [])},
        )
