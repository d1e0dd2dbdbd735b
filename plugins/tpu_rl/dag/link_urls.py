"""The console links' URLs, computed from the run's layout where a link is computed (in the worker,
when a task ends or defers), not on every parse of the DAG file."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING
from urllib.parse import quote

from airflow.providers.google.cloud.links.kubernetes_engine import (
    KUBERNETES_CLUSTER_LINK,
    KUBERNETES_JOB_LINK,
    KUBERNETES_WORKLOADS_LINK,
)
from airflow.sdk.execution_time.xcom import XCom

from tpu_rl.layout import RUN_LABEL, RunLayout, split_gcs_uri
from tpu_rl.settings.run_settings import SETTING_FIELDS, RunSettings

if TYPE_CHECKING:
    from airflow.sdk.types import TaskInstanceKey

CONSOLE = "https://console.cloud.google.com"
SETTINGS_TASK = "validate"
# Whose Job a task's links show: its own, or the Job it watches (a RunLayout.job_names step).
JOB_OF_TASK = {
    "convert": "convert",
    "train": "train",
    "wait_for_rewards": "train",
    "export": "export",
}
JOBSET_TASKS = {"start_backend", "stop_backend"}


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
    if not isinstance(recorded, Mapping):
        raise LookupError(f"{SETTINGS_TASK} has not returned the settings of {run_id}")
    settings = RunSettings(**{k: v for k, v in recorded.items() if k in SETTING_FIELDS})
    return RunLayout(settings, run_id)


def storage_browser(uri: str, project: str) -> str:
    bucket, path = split_gcs_uri(uri)
    return f"{CONSOLE}/storage/browser/{bucket}/{path};tab=objects?project={quote(project)}"


def job_name(layout: RunLayout, task_id: str) -> str | None:
    """The name of the Job the task runs or watches; None for a task without one."""
    step = JOB_OF_TASK.get(task_id)
    return layout.job_names[step] if step else None


def pod_log_query(layout: RunLayout, task_id: str) -> str:
    """Cloud Logging query for the containers of this run (and of the task's Job or JobSet)."""
    s = layout.settings
    job = job_name(layout, task_id)
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
    elif task_id in JOBSET_TASKS:
        lines.append(f'labels."k8s-pod/jobset_sigs_k8s_io/jobset-name"="{layout.backend_jobset}"')
    return "\n".join(lines)


def gke_page(layout: RunLayout, page: str, **fields: str) -> str:
    """A GKE console page (one of the provider's link formats) of the run's cluster."""
    s = layout.settings
    cluster = {"location": s.region, "cluster_name": s.cluster_name, "project_id": s.project}
    return CONSOLE + page.format(**cluster, namespace=s.namespace, **fields)


def cluster_page(layout: RunLayout, task_id: str) -> str:
    return gke_page(layout, KUBERNETES_CLUSTER_LINK)


def workloads_page(layout: RunLayout, task_id: str) -> str:
    return gke_page(layout, KUBERNETES_WORKLOADS_LINK)


def job_page(layout: RunLayout, task_id: str) -> str:
    """The provider's "Kubernetes Job" page, without its link's XCom reads (two per worker call)."""
    job = job_name(layout, task_id)
    return gke_page(layout, KUBERNETES_JOB_LINK, job_name=job) if job else ""


def pod_logs(layout: RunLayout, task_id: str) -> str:
    query = quote(pod_log_query(layout, task_id), safe="")
    return (
        f"{CONSOLE}/logs/query;query={query};duration=P7D?project={quote(layout.settings.project)}"
    )


def checkpoints(layout: RunLayout, task_id: str) -> str:
    return storage_browser(layout.checkpoints_dir, layout.settings.project)


def export(layout: RunLayout, task_id: str) -> str:
    return storage_browser(layout.export_dir, layout.settings.project)


# By link name (tpu_rl.dag.links).
URLS: dict[str, Callable[[RunLayout, str], str]] = {
    "GKE cluster": cluster_page,
    "GKE workloads": workloads_page,
    "Kubernetes Job": job_page,
    "Pod logs (Cloud Logging)": pod_logs,
    "Checkpoints (Cloud Storage)": checkpoints,
    "Exported model (Cloud Storage)": export,
}


def link_url(name: str, ti_key: TaskInstanceKey) -> str:
    """The URL of the link `name` for a task of a run; empty before `validate` succeeded."""
    layout = run_layout(ti_key)
    return URLS[name](layout, ti_key.task_id) if layout else ""
