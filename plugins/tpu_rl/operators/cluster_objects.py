"""The run's Kubernetes objects besides its Jobs: the token Secret, and the cleanup of every
object the run labelled. Both on the provider's GKE-authenticated client; the provider has no
operator that tolerates "already exists" or "already gone"."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING

from airflow.providers.google.cloud.operators.kubernetes_engine import GKEOperatorMixin
from kubernetes.client import CoreV1Api, CustomObjectsApi

from tpu_rl import deployment
from tpu_rl.dag.limits import CLEANUP, short_step
from tpu_rl.dag.links import GkeWorkloadsLink
from tpu_rl.names import Step
from tpu_rl.operators.run_step import OnRunCluster

if TYPE_CHECKING:
    from airflow.sdk import Context

    from tpu_rl.layout import RunLayout


class RunClusterStep(OnRunCluster, GKEOperatorMixin):
    """A step on the run's GKE cluster (unless named) with the provider's credentials."""

    template_fields: Sequence[str] = tuple(GKEOperatorMixin.template_fields)

    @property
    def core(self) -> CoreV1Api:
        return self.hook.core_v1_client

    @cached_property
    def custom(self) -> CustomObjectsApi:
        """One client for the task (get_conn builds a new connection pool each call)."""
        return CustomObjectsApi(self.hook.get_conn())


class CreateTokenSecretOperator(RunClusterStep):
    """Copies the Hugging Face token from its Airflow connection into the run's Secret."""

    step_id = Step.HF_TOKEN_SECRET
    step_doc = """
Copies the Hugging Face token from the Airflow connection into a Secret of this run, for the
conversion and export Jobs. The token is never a Param and never logged.
"""
    limit = short_step(2)
    operator_extra_links = (GkeWorkloadsLink(),)

    def execute(self, context: Context) -> None:
        from airflow.providers.common.compat.sdk import AirflowFailException
        from kubernetes.client.rest import ApiException

        from tpu_rl.jobs import manifests

        layout = self.run_layout(context)
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


class CleanupKubernetesOperator(RunClusterStep):
    """Deletes every object of the swept kinds (tpu_rl.kube.swept) labelled with this run; each
    kind runs regardless."""

    step_id = Step.CLEANUP_KUBERNETES
    step_doc = """
A teardown: runs however the run ends (failed, marked failed) once the cluster or the token
Secret was set up, and deletes the run's Kubernetes objects. Retries; whatever it cannot remove,
the `tpu_rl_janitor` DAG removes later.

It deletes the JobSets, Jobs and Secrets labelled with this run, in that order.
"""
    limit = short_step(4, CLEANUP)
    operator_extra_links = (GkeWorkloadsLink(),)

    def execute(self, context: Context) -> dict[str, list[str]]:
        from airflow.providers.common.compat.sdk import AirflowException, AirflowSkipException

        from tpu_rl.settings.run_settings import SettingsError

        try:
            layout = self.run_layout(context)
        except SettingsError as err:
            raise AirflowSkipException(f"settings invalid, so nothing was created: {err}") from err
        removed, errors = self.remove_run_objects(layout)
        if errors:
            raise AirflowException("cleanup incomplete (retrying is safe): " + "; ".join(errors))
        return removed

    def remove_run_objects(self, layout: RunLayout) -> tuple[dict[str, list[str]], list[str]]:
        """Delete the run's objects of the swept kinds: what was removed, what went wrong."""
        from tpu_rl.kube.swept import sweep

        namespace = layout.settings.namespace
        removed, errors = sweep(self.custom.api_client, namespace, layout.run_selector)
        self.log.info("Removed from %s: %s", namespace, removed)
        return removed, errors
