"""The console links' URLs, computed from the run's layout where a link is computed (in the worker,
when a task ends or defers), not on every parse of the DAG file."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import quote

from airflow.providers.google.cloud.links.kubernetes_engine import (
    KUBERNETES_CLUSTER_LINK,
    KUBERNETES_JOB_LINK,
    KUBERNETES_WORKLOADS_LINK,
)
from airflow.sdk.execution_time.xcom import XCom

from tpu_rl.layout import RUN_LABEL, RunLayout, split_gcs_uri
from tpu_rl.names import BACKEND_PODS
from tpu_rl.run_record import SETTINGS_TASK, recorded_deployment, recorded_settings
from tpu_rl.settings.fields import SETTING_FIELDS, RunSettings

if TYPE_CHECKING:
    from airflow.sdk.types import TaskInstanceKey

CONSOLE = "https://console.cloud.google.com"


def run_layout(ti_key: TaskInstanceKey) -> RunLayout | None:
    """The run's layout from the settings `validate` returned; None before it succeeded."""
    try:
        return _recorded_layout(ti_key.dag_id, ti_key.run_id)
    except LookupError:
        return None


@functools.lru_cache(maxsize=8)
def _recorded_layout(dag_id: str, run_id: str) -> RunLayout:
    """Read once per run and process: a task's links are computed one by one when it ends (and
    when it defers), each from the same settings; a run's settings never change."""
    recorded = XCom.get_one(key="return_value", dag_id=dag_id, task_id=SETTINGS_TASK, run_id=run_id)
    values = recorded_settings(recorded)  # NoRunRecord (a LookupError) before validate returned
    settings = RunSettings(**{k: v for k, v in values.items() if k in SETTING_FIELDS})
    return RunLayout(settings, run_id, recorded_deployment(recorded, run_id))


def storage_browser(uri: str, project: str) -> str:
    bucket, path = split_gcs_uri(uri)
    return f"{CONSOLE}/storage/browser/{bucket}/{path};tab=objects?project={quote(project)}"


def job_name(layout: RunLayout, pods_of: str | None) -> str | None:
    """The name of the run's Job whose pods a step shows (RunStep.pods_of); None for none."""
    return layout.job_names.get(pods_of) if pods_of else None


def pod_log_query(layout: RunLayout, pods_of: str | None) -> str:
    """Cloud Logging query for the containers of this run (and of the step's Job or JobSet)."""
    s = layout.settings
    job = job_name(layout, pods_of)
    lines = [
        'resource.type="k8s_container"',
        f'resource.labels.project_id="{s.project}"',
        f'resource.labels.cluster_name="{s.cluster_name}"',
        f'resource.labels.namespace_name="{s.namespace}"',
        # pod labels in Cloud Logging: dots become underscores under the k8s-pod/ prefix
        f'labels."k8s-pod/{RUN_LABEL.replace(".", "_")}"="{layout.slug}"',
    ]
    if job:
        lines.append(f'labels."k8s-pod/job-name"="{job}"')
    elif pods_of == BACKEND_PODS:
        lines.append(f'labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="{layout.backend_jobset}"')
    return "\n".join(lines)


def gke_page(layout: RunLayout, page: str, **fields: str) -> str:
    """A GKE console page (one of the provider's link formats) of the run's cluster."""
    s = layout.settings
    cluster = {"location": s.region, "cluster_name": s.cluster_name, "project_id": s.project}
    return CONSOLE + page.format(**cluster, namespace=s.namespace, **fields)


def cluster_page(layout: RunLayout, pods_of: str | None) -> str:
    return gke_page(layout, KUBERNETES_CLUSTER_LINK)


def workloads_page(layout: RunLayout, pods_of: str | None) -> str:
    return gke_page(layout, KUBERNETES_WORKLOADS_LINK)


def job_page(layout: RunLayout, pods_of: str | None) -> str:
    """The provider's "Kubernetes Job" page, without its link's XCom reads (two per worker call)."""
    job = job_name(layout, pods_of)
    return gke_page(layout, KUBERNETES_JOB_LINK, job_name=job) if job else ""


def pod_logs(layout: RunLayout, pods_of: str | None) -> str:
    query = quote(pod_log_query(layout, pods_of), safe="")
    return (
        f"{CONSOLE}/logs/query;query={query};duration=P7D?project={quote(layout.settings.project)}"
    )


def checkpoints(layout: RunLayout, pods_of: str | None) -> str:
    return storage_browser(layout.checkpoints_dir, layout.settings.project)


def export(layout: RunLayout, pods_of: str | None) -> str:
    return storage_browser(layout.export_dir, layout.settings.project)


# By link name (tpu_rl.dag.links).
URLS: dict[str, Callable[[RunLayout, str | None], str]] = {
    "GKE cluster": cluster_page,
    "GKE workloads": workloads_page,
    "Kubernetes Job": job_page,
    "Pod logs (Cloud Logging)": pod_logs,
    "Checkpoints (Cloud Storage)": checkpoints,
    "Exported model (Cloud Storage)": export,
}


def link_url(name: str, ti_key: TaskInstanceKey, pods_of: str | None) -> str:
    """The URL of the link `name` for a step of a run whose links show `pods_of`'s pods (see
    RunStep.pods_of); empty before `validate` succeeded."""
    layout = run_layout(ti_key)
    return URLS[name](layout, pods_of) if layout else ""
