"""Extra links from the DAG's tasks to the Google Cloud console: GKE, Cloud Logging, Cloud Storage.

Airflow 3 computes an operator's links in the worker each time a task ends or defers, and pushes
each as an XCom: an Execution API call per link per worker call. So the links read one thing, the
settings `validate` returned (once per run and process), and compute the rest from them: Job and
JobSet names are the run's own (`RunLayout`). Before `validate` succeeded a link is empty (shown
disabled). A waiting task carries few links: each one is paid again at every deferral.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey


class RunLink(BaseOperatorLink):
    """A console link computed from the run's layout (tpu_rl.dag.link_urls, by name); empty while
    there is none."""

    name: ClassVar[str]

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        from tpu_rl.dag.link_urls import link_url

        return link_url(self.name, ti_key, getattr(operator, "pods_of", None))


def _run_link(class_name: str, name: str) -> type[RunLink]:
    """A RunLink class of this module (Airflow records a task's links by their import path)."""
    return type(class_name, (RunLink,), {"name": name, "__module__": __name__})


GkeClusterLink = _run_link("GkeClusterLink", "GKE cluster")
GkeWorkloadsLink = _run_link("GkeWorkloadsLink", "GKE workloads")
KubernetesJobLink = _run_link("KubernetesJobLink", "Kubernetes Job")
PodLogsLink = _run_link("PodLogsLink", "Pod logs (Cloud Logging)")
CheckpointsLink = _run_link("CheckpointsLink", "Checkpoints (Cloud Storage)")
ExportLink = _run_link("ExportLink", "Exported model (Cloud Storage)")


JOB_LINKS = (KubernetesJobLink(), PodLogsLink())
BACKEND_LINKS = (GkeWorkloadsLink(), PodLogsLink())
LINK_CLASSES = [
    GkeClusterLink,
    GkeWorkloadsLink,
    KubernetesJobLink,
    PodLogsLink,
    CheckpointsLink,
    ExportLink,
]
