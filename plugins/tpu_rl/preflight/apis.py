"""The Google APIs a run calls, enabled in the run's project (Service Usage services.batchGet:
https://cloud.google.com/service-usage/docs/reference/rest/v1/services/batchGet)."""

from __future__ import annotations

from tpu_rl.cluster.ladder import rungs
from tpu_rl.preflight.google_api import GoogleApi
from tpu_rl.preflight.result import CheckResult, failed, passed
from tpu_rl.settings.capacity_modes import capacity_mode
from tpu_rl.settings.fields import RunSettings

SERVICE_USAGE = "serviceusage.googleapis.com"
# What gcluster's Terraform and the run call: the TPU VMs, network and reservations (Compute),
# the cluster (GKE), the bucket, the blueprint's service accounts and their project roles.
NEEDED_APIS = (
    "compute.googleapis.com",
    "container.googleapis.com",
    "storage.googleapis.com",
    "iam.googleapis.com",
    "cloudresourcemanager.googleapis.com",
)
# Cloud Quotas, read for the TPU quota of a flex-start or Spot rung (tpu_rl.preflight.capacity)
CLOUD_QUOTAS = "cloudquotas.googleapis.com"
NAME = "apis enabled"


def needed_apis(s: RunSettings) -> tuple[str, ...]:
    """The APIs of every run, and Cloud Quotas when a rung draws on quota."""
    if any(not capacity_mode(rung.mode).takes_reservation for rung in rungs(s)):
        return (*NEEDED_APIS, CLOUD_QUOTAS)
    return NEEDED_APIS


def check_apis(api: GoogleApi, s: RunSettings) -> list[CheckResult]:
    """One result: every needed API is ENABLED, or which are not."""
    needed = needed_apis(s)
    names = [f"projects/{s.project}/services/{service}" for service in needed]
    # REST: no lock pins google-cloud-service-usage, Service Usage's typed client
    answer = api.get(SERVICE_USAGE, f"/v1/projects/{s.project}/services:batchGet", {"names": names})
    states = {
        (svc.get("config") or {}).get("name") or svc["name"].rsplit("/", 1)[-1]: svc.get("state")
        for svc in answer.get("services") or []
    }
    off = [service for service in needed if states.get(service) != "ENABLED"]
    if off:
        return [
            failed(
                NAME,
                f"not enabled in {s.project}: {', '.join(off)}",
                f"gcloud services enable {' '.join(off)} --project={s.project}",
            )
        ]
    return [passed(NAME, f"{', '.join(needed)} enabled in {s.project}")]
