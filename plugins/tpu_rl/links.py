"""Extra links from the DAG's tasks to the Google Cloud console: GKE, Cloud Logging, Cloud Storage.

Airflow 3 computes an operator's links in the worker each time a task ends or defers, and pushes
each as an XCom: an Execution API call per link per worker call. So the links read one thing, the
settings `validate` returned (once per run and process), and compute the rest from them: Job and
JobSet names are the run's own (`RunLayout`). Before `validate` succeeded a link is empty (shown
disabled). A waiting task carries few links: each one is paid again at every deferral.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote

from airflow.providers.google.cloud.links.kubernetes_engine import (
    KUBERNETES_CLUSTER_LINK,
    KUBERNETES_JOB_LINK,
    KUBERNETES_WORKLOADS_LINK,
)
from airflow.sdk import BaseOperatorLink
from airflow.sdk.execution_time.xcom import XCom

# The run's layout and settings are imported where a link is computed (in the worker), not on
# every parse of the DAG file.

if TYPE_CHECKING:
    from airflow.sdk import DAG, BaseOperator
    from airflow.sdk.types import TaskInstanceKey

    from tpu_rl.layout import RunLayout

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
    from tpu_rl.layout import RunLayout
    from tpu_rl.settings import SETTING_FIELDS, RunSettings

    recorded = XCom.get_one(key="return_value", dag_id=dag_id, task_id=SETTINGS_TASK, run_id=run_id)
    if not isinstance(recorded, Mapping):
        raise LookupError(f"{SETTINGS_TASK} has not returned the settings of {run_id}")
    settings = RunSettings(**{k: v for k, v in recorded.items() if k in SETTING_FIELDS})
    return RunLayout(settings, run_id)


def storage_browser(uri: str, project: str) -> str:
    from tpu_rl.layout import split_gcs_uri

    bucket, path = split_gcs_uri(uri)
    return f"{CONSOLE}/storage/browser/{bucket}/{path};tab=objects?project={quote(project)}"


def job_name(layout: RunLayout, task_id: str) -> str | None:
    """The name of the Job the task runs or watches; None for a task without one."""
    step = JOB_OF_TASK.get(task_id)
    return layout.job_names[step] if step else None


def pod_log_query(layout: RunLayout, task_id: str) -> str:
    """Cloud Logging query for the containers of this run (and of the task's Job or JobSet)."""
    from tpu_rl.layout import RUN_LABEL

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


class RunLink(BaseOperatorLink):
    """A console link computed from the run's layout; empty while there is none."""

    name: ClassVar[str]

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        layout = run_layout(ti_key)
        return self.url(layout, ti_key) if layout else ""

    def url(self, layout: RunLayout, ti_key: TaskInstanceKey) -> str:
        raise NotImplementedError


def gke_page(layout: RunLayout, page: str, **fields: str) -> str:
    """A GKE console page (one of the provider's link formats) of the run's cluster."""
    s = layout.settings
    cluster = {"location": s.region, "cluster_name": s.cluster_name, "project_id": s.project}
    return CONSOLE + page.format(**cluster, namespace=s.namespace, **fields)


class GkeClusterLink(RunLink):
    name = "GKE cluster"

    def url(self, layout: RunLayout, ti_key: TaskInstanceKey) -> str:
        return gke_page(layout, KUBERNETES_CLUSTER_LINK)


class GkeWorkloadsLink(RunLink):
    name = "GKE workloads"

    def url(self, layout: RunLayout, ti_key: TaskInstanceKey) -> str:
        return gke_page(layout, KUBERNETES_WORKLOADS_LINK)


class KubernetesJobLink(RunLink):
    """The provider's "Kubernetes Job" page, without its link's XCom reads (two per worker call)."""

    name = "Kubernetes Job"

    def url(self, layout: RunLayout, ti_key: TaskInstanceKey) -> str:
        job = job_name(layout, ti_key.task_id)
        return gke_page(layout, KUBERNETES_JOB_LINK, job_name=job) if job else ""


class PodLogsLink(RunLink):
    name = "Pod logs (Cloud Logging)"

    def url(self, layout: RunLayout, ti_key: TaskInstanceKey) -> str:
        query = pod_log_query(layout, ti_key.task_id)
        project = quote(layout.settings.project)
        return f"{CONSOLE}/logs/query;query={quote(query, safe='')};duration=P7D?project={project}"


class CheckpointsLink(RunLink):
    name = "Checkpoints (Cloud Storage)"

    def url(self, layout: RunLayout, ti_key: TaskInstanceKey) -> str:
        return storage_browser(layout.checkpoints_dir, layout.settings.project)


class ExportLink(RunLink):
    name = "Exported model (Cloud Storage)"

    def url(self, layout: RunLayout, ti_key: TaskInstanceKey) -> str:
        return storage_browser(layout.export_dir, layout.settings.project)


JOB_LINKS = (KubernetesJobLink(), PodLogsLink())
BACKEND_LINKS = (GkeWorkloadsLink(), PodLogsLink())
LINKS_BY_TASK: dict[str, tuple[RunLink, ...]] = {
    "create_cluster": (GkeClusterLink(),),
    "hf_token_secret": (GkeWorkloadsLink(),),
    "convert": JOB_LINKS,
    "start_backend": BACKEND_LINKS,
    "train": (*JOB_LINKS, CheckpointsLink()),
    "wait_for_rewards": (PodLogsLink(), CheckpointsLink()),
    "stop_backend": BACKEND_LINKS,
    "gate": (CheckpointsLink(),),
    "export": (*JOB_LINKS, ExportLink()),
    "verify": (ExportLink(),),
    "cleanup_kubernetes": (GkeWorkloadsLink(),),
    "cleanup_cluster": (GkeClusterLink(),),
}
LINK_CLASSES = [
    GkeClusterLink,
    GkeWorkloadsLink,
    KubernetesJobLink,
    PodLogsLink,
    CheckpointsLink,
    ExportLink,
]


def add_links(dag: DAG) -> None:
    """Gives the DAG's tasks their console links: these replace what their operators carry
    (the Job operators' "Kubernetes Job" link, here computed from the run)."""
    for task_id, links in LINKS_BY_TASK.items():
        if task_id in dag.task_dict:
            task: Any = dag.task_dict[task_id]
            task.operator_extra_links = links
