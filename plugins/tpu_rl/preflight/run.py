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
from tpu_rl.preflight.result import CheckResult, guarded
from tpu_rl.settings.choices import ClusterMode

RETRY = "run preflight again; if it persists, check the API's status and the network"


def run_preflight(layout: RunLayout, gcp_conn_id: str, hf_token: str) -> list[CheckResult]:
    """The results of every check that applies to the run's settings."""
    s = layout.settings
    api = GoogleApi(gcp_conn_id)
    results = guarded(apis.NAME, RETRY, lambda: apis.check_apis(api, s))
    results += guarded(iam.CALLER, RETRY, lambda: iam.check_caller(api, s))
    results += guarded(capacity.OFFERED, RETRY, lambda: capacity.check_offered(api, s))
    results += guarded(capacity.RESERVATION, RETRY, lambda: capacity.check_capacity(api, s))
    results += guarded("bucket", RETRY, lambda: check_bucket(s, gcp_conn_id))
    if s.cluster_mode == ClusterMode.EXISTING:
        results += guarded(cluster.STANDARD, RETRY, lambda: _existing(api, layout, gcp_conn_id))
    results += guarded(images.NAME, RETRY, lambda: images.check_images(api, s))
    results += guarded(huggingface.TOKEN, RETRY, lambda: huggingface.check_huggingface(s, hf_token))
    results.append(vertex.check_registry_settings(s))
    return results


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
