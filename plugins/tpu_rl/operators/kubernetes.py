"""The run's other Kubernetes objects: the token Secret, the Pathways backend, and cleanup.

The providers create Jobs and custom objects but neither wait for a JobSet's pods nor tolerate
"already exists"/"already gone"; one operator does, on the provider's GKE-authenticated client,
its `step` naming what it does (tpu_rl.operators.cluster_steps, imported where a step runs: one
class,
not one per step, and no step's code, on every parse of the DAG file).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.providers.google.cloud.operators.kubernetes_engine import GKEOperatorMixin
from airflow.sdk import BaseOperator
from kubernetes.client import CoreV1Api, CustomObjectsApi

from tpu_rl import deployment
from tpu_rl.dag.limits import RunLimited
from tpu_rl.operators import on_run_cluster

if TYPE_CHECKING:
    from airflow.sdk import Context

CLUSTER_FIELDS = ("project_id", "location", "cluster_name")
CLUSTER_STEPS = ("hf_token_secret", "start_backend", "stop_backend", "cleanup_kubernetes")


class RunClusterOperator(RunLimited, GKEOperatorMixin, BaseOperator):
    """One step on a GKE cluster (the run's unless named) with the provider's credentials:
    `hf_token_secret`,
    `start_backend` (creates the Pathways JobSet, waits in the triggerer until its pods run),
    `stop_backend` or `cleanup_kubernetes` (every Job, JobSet and Secret of the run)."""

    template_fields: Sequence[str] = tuple(GKEOperatorMixin.template_fields)

    def __init__(
        self,
        *,
        step: str,
        gcp_conn_id: str | None = None,
        impersonation_chain: str | Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        if step not in CLUSTER_STEPS:
            raise ValueError(f"step {step!r} is none of {', '.join(CLUSTER_STEPS)}")
        cluster = on_run_cluster(kwargs)
        super().__init__(**{k: v for k, v in cluster.items() if k not in CLUSTER_FIELDS})
        self.step = step
        self.project_id = cluster["project_id"]
        self.location = cluster["location"]
        self.cluster_name = cluster["cluster_name"]
        self.gcp_conn_id = gcp_conn_id or deployment.gcp_conn_id()
        self.impersonation_chain = impersonation_chain
        self.use_internal_ip = False
        self.use_dns_endpoint = False

    def execute(self, context: Context) -> Any:
        from tpu_rl.operators.cluster_steps import STEPS

        return STEPS[self.step](self, context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        """The step's end after its wait in the triggerer."""
        from tpu_rl.operators.cluster_steps import RESUMES

        return RESUMES[self.step](self, context, event)

    @property
    def core(self) -> CoreV1Api:
        return self.hook.core_v1_client

    @cached_property
    def custom(self) -> CustomObjectsApi:
        """One client for the task (get_conn builds a new connection pool each call)."""
        return CustomObjectsApi(self.hook.get_conn())
