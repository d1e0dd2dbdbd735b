"""Every preflight check of a run, in the order a run would meet the problem, against the
deployment's connections. Read-only: nothing is created or changed."""

from __future__ import annotations

from tpu_rl.layout import RunLayout
from tpu_rl.preflight import (
    apis,
    capacity,
    cluster,
    cluster_software,
    huggingface,
    iam,
    images,
    vertex,
)
from tpu_rl.preflight.bucket import check_bucket
from tpu_rl.preflight.google_api import GoogleApi
from tpu_rl.preflight.result import CheckResult, failed, guarded, skipped
from tpu_rl.settings.choices import ClusterMode

RETRY = "run preflight again; if it persists, check the API's status and the network"
CREDENTIALS = "google credentials"
CREDENTIALS_FIX = (
    "gcloud auth application-default login (the connection google-cloud-platform:// uses "
    "application-default credentials), or give the connection a service account key "
    "(keyfile_dict) or impersonation_chain"
)


def run_preflight(
    layout: RunLayout, gcp_conn_id: str | CheckResult, hf_token: str | CheckResult
) -> list[CheckResult]:
    """The results of every check that applies to the run's settings, every one run that can
    be: a connection that could not be read (a failed CheckResult in place of its id or token)
    or Google credentials that cannot be had is one FAIL line, and the checks that need it are
    SKIPPED, saying why."""
    s = layout.settings
    google = _google_session(gcp_conn_id)
    results = [google] if isinstance(google, CheckResult) else []
    if isinstance(google, CheckResult):
        why = f"needs Google credentials ({google.name} failed)"
        names = [apis.NAME, iam.CALLER, capacity.OFFERED, capacity.RESERVATION, "bucket"]
        names += [cluster.STANDARD] if s.cluster_mode == ClusterMode.EXISTING else []
        results += [skipped(name, why) for name in [*names, images.NAME]]
    else:
        api, conn = google
        results += guarded(apis.NAME, RETRY, lambda: apis.check_apis(api, s))
        results += guarded(iam.CALLER, RETRY, lambda: iam.check_caller(api, s))
        results += guarded(capacity.OFFERED, RETRY, lambda: capacity.check_offered(api, s))
        results += guarded(capacity.RESERVATION, RETRY, lambda: capacity.check_capacity(api, s))
        results += guarded("bucket", RETRY, lambda: check_bucket(s, conn))
        if s.cluster_mode == ClusterMode.EXISTING:
            results += guarded(cluster.STANDARD, RETRY, lambda: _existing(api, layout, conn))
        results += guarded(images.NAME, RETRY, lambda: images.check_images(api, s))
    if isinstance(hf_token, CheckResult):
        results.append(hf_token)
    else:
        token = hf_token
        results += guarded(
            huggingface.TOKEN, RETRY, lambda: huggingface.check_huggingface(s, token)
        )
    results.append(vertex.check_registry_settings(s))
    return results


def _google_session(gcp_conn_id: str | CheckResult) -> tuple[GoogleApi, str] | CheckResult:
    """An authorized session on the connection's credentials, or the FAIL line saying why
    there is none (google.auth's DefaultCredentialsError without application-default
    credentials: its message and the fix, never its traceback)."""
    if isinstance(gcp_conn_id, CheckResult):
        return gcp_conn_id
    try:
        return GoogleApi(gcp_conn_id), gcp_conn_id
    except Exception as err:  # DefaultCredentialsError, a bad key file, a refused refresh
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return failed(
            CREDENTIALS,
            f"connection {gcp_conn_id!r}: {type(err).__name__}: {reason}",
            CREDENTIALS_FIX,
        )


def _existing(api: GoogleApi, layout: RunLayout, gcp_conn_id: str) -> list[CheckResult]:
    """The existing cluster's checks; those past a missing or Autopilot cluster are moot."""
    s = layout.settings
    found = cluster.read_cluster(s, gcp_conn_id)
    results = [cluster.check_standard(s, found)]
    if not results[0].passed:
        return results
    pools, accounts = cluster.check_pools(s, found)
    results.append(pools)
    if accounts:
        results += guarded(
            iam.POOLS, RETRY, lambda: [iam.check_pool_roles(api, s, accounts, gcp_conn_id)]
        )
    client = cluster.kube_client(found, gcp_conn_id)
    results += [cluster_software.check_controller(client, name) for name in ("jobset", "kueue")]
    results += guarded(
        cluster_software.QUEUE, RETRY, lambda: [cluster_software.check_queue(client, layout)]
    )
    results += guarded(
        cluster_software.PRIORITY, RETRY, lambda: [cluster_software.check_priority_class(client)]
    )
    return results
