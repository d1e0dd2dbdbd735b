"""The run's other Kubernetes objects: the token Secret, the Pathways backend, and cleanup.

The providers create Jobs and custom objects but neither wait for a JobSet's pods nor tolerate
"already exists"/"already gone"; these operators do, on the provider's GKE-authenticated client.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.providers.google.cloud.operators.kubernetes_engine import GKEOperatorMixin
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException
from kubernetes.client import BatchV1Api, CoreV1Api, CustomObjectsApi
from kubernetes.client.rest import ApiException

from tpu_rl import deployment
from tpu_rl.limits import RunLimited, capped_deadline

# What the objects are made of (manifests, layout, settings, kube, kueue) is imported where a
# task runs, not on every parse of the DAG file.

if TYPE_CHECKING:
    from airflow.sdk import Context

    from tpu_rl.layout import RunLayout


class RunClusterOperator(RunLimited, GKEOperatorMixin, BaseOperator):
    """Base for operators that act on the run's GKE cluster with the provider's credentials."""

    template_fields: Sequence[str] = tuple(GKEOperatorMixin.template_fields)

    def __init__(
        self,
        *,
        project_id: str,
        location: str,
        cluster_name: str,
        gcp_conn_id: str | None = None,
        impersonation_chain: str | Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.project_id = project_id
        self.location = location
        self.cluster_name = cluster_name
        self.gcp_conn_id = gcp_conn_id or deployment.gcp_conn_id()
        self.impersonation_chain = impersonation_chain
        self.use_internal_ip = False
        self.use_dns_endpoint = False

    def run_layout(self, context: Context) -> RunLayout:
        """The run's layout, or a skip with the reason when its settings are invalid."""
        from tpu_rl.runtime import layout_from_context
        from tpu_rl.settings import SettingsError

        try:
            return layout_from_context(context)
        except SettingsError as err:
            raise AirflowSkipException(f"settings invalid, so nothing was created: {err}") from err

    @property
    def core(self) -> CoreV1Api:
        return self.hook.core_v1_client

    @property
    def batch(self) -> BatchV1Api:
        return self.hook.batch_v1_client

    @cached_property
    def custom(self) -> CustomObjectsApi:
        """One client for the task (get_conn builds a new connection pool each call)."""
        return CustomObjectsApi(self.hook.get_conn())


class HfTokenSecretOperator(RunClusterOperator):
    """Copies the Hugging Face token from its Airflow connection into the run's Secret."""

    def execute(self, context: Context) -> None:
        from tpu_rl import manifests
        from tpu_rl.runtime import layout_from_context

        layout = layout_from_context(context)
        try:
            token = deployment.hf_token()
        except deployment.DeploymentError as err:
            raise AirflowFailException(str(err)) from err
        secret = manifests.token_secret(layout, token)
        namespace, name = layout.settings.namespace, layout.token_secret
        try:
            self.core.create_namespaced_secret(namespace=namespace, body=secret)
        except ApiException as err:
            if err.status != 409:
                raise
            self.core.replace_namespaced_secret(name=name, namespace=namespace, body=secret)
        self.log.info(
            "Secret %s/%s holds the token of %s.", namespace, name, deployment.hf_conn_id()
        )


class BackendStartOperator(RunClusterOperator):
    """Creates the headless Pathways JobSet and waits until all its pods run."""

    def execute(self, context: Context) -> str:
        from tpu_rl.backend import submit_backend
        from tpu_rl.runtime import layout_from_context

        layout = layout_from_context(context)
        submit_backend(self.custom, layout, self.log)
        self._wait_running(layout)
        return layout.backend_jobset

    def _wait_running(self, layout: RunLayout) -> None:
        from tpu_rl.backend import backend_running_trigger

        pending = layout.settings.pending_timeout_minutes * 60
        self.defer(
            trigger=backend_running_trigger(self, layout, capped_deadline(self, pending)),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> str:
        """The backend JobSet's name once all its pods run (the training client may start)."""
        from tpu_rl.backend import backend_failure
        from tpu_rl.runtime import layout_from_context

        layout = layout_from_context(context)
        if (failure := backend_failure(event)) is not None:
            raise failure
        return layout.backend_jobset


class BackendStopOperator(RunClusterOperator):
    """Deletes the backend JobSet (it holds the TPUs); already gone is fine.

    The reward sensor deletes it when its wait ends, and cleanup_kubernetes deletes it in any
    run, so this step only makes sure, after a successful wait, before the gate and export.
    """

    def execute(self, context: Context) -> bool:
        from tpu_rl.kube import delete_backend
        from tpu_rl.runtime import layout_from_context

        layout = layout_from_context(context)
        deleted = delete_backend(
            self.custom.api_client, layout.settings.namespace, layout.backend_jobset
        )
        self.log.info(
            "Backend %s %s.", layout.backend_jobset, "deleted" if deleted else "already gone"
        )
        return deleted


class CleanupKubernetesOperator(RunClusterOperator):
    """Deletes every Job, JobSet and Secret labelled with this run; each part runs regardless."""

    def execute(self, context: Context) -> dict[str, list[str]]:
        removed, errors = self.remove_run_objects(self.run_layout(context))
        if errors:
            raise AirflowException("cleanup incomplete (retrying is safe): " + "; ".join(errors))
        return removed

    def remove_run_objects(self, layout: RunLayout) -> tuple[dict[str, list[str]], list[str]]:
        """Delete the run's JobSets, Jobs and Secrets: what was removed, and what went wrong."""
        from tpu_rl.kube import sweep
        from tpu_rl.layout import RUN_LABEL

        namespace = layout.settings.namespace
        selector = (
            f"{RUN_LABEL}={layout.slug},{deployment.DEPLOYMENT_LABEL}={deployment.deployment_id()}"
        )
        removed, errors = sweep(self.custom.api_client, namespace, selector)
        self.log.info("Removed from %s: %s", namespace, removed)
        return removed, errors
