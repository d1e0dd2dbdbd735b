"""What each RunClusterOperator step does in the worker: the token Secret, the Pathways backend
and the run's cleanup (imported where a step runs, not on every parse of the DAG file)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException
from kubernetes.client.rest import ApiException

from tpu_rl import deployment
from tpu_rl.backend.lifecycle import backend_failure, backend_running_trigger, submit_backend
from tpu_rl.dag import runtime
from tpu_rl.dag.run_limits import capped_deadline
from tpu_rl.jobs import manifests
from tpu_rl.kube.objects import delete_backend, sweep
from tpu_rl.layout import RUN_LABEL, RunLayout
from tpu_rl.settings.run_settings import SettingsError

if TYPE_CHECKING:
    from airflow.sdk import Context

    from tpu_rl.operators.kubernetes import RunClusterOperator


def hf_token_secret(op: RunClusterOperator, context: Context) -> None:
    """Copies the Hugging Face token from its Airflow connection into the run's Secret."""
    layout = runtime.layout_from_context(context)
    try:
        token = deployment.hf_token()
    except deployment.DeploymentError as err:
        raise AirflowFailException(str(err)) from err
    secret = manifests.token_secret(layout, token)
    namespace, name = layout.settings.namespace, layout.token_secret
    try:
        op.core.create_namespaced_secret(namespace=namespace, body=secret)
    except ApiException as err:
        if err.status != 409:
            raise
        op.core.replace_namespaced_secret(name=name, namespace=namespace, body=secret)
    op.log.info("Secret %s/%s holds the token of %s.", namespace, name, deployment.hf_conn_id())


def start_backend(op: RunClusterOperator, context: Context) -> str:
    """Creates the headless Pathways JobSet, then defers until all its pods run."""
    layout = runtime.layout_from_context(context)
    submit_backend(op.custom, layout, op.log)
    pending = layout.settings.pending_timeout_minutes * 60
    op.defer(
        trigger=backend_running_trigger(op, layout, capped_deadline(op, pending)),
        method_name="execute_complete",
    )


def backend_started(op: RunClusterOperator, context: Context, event: dict[str, Any]) -> str:
    """The backend JobSet's name once all its pods run (the training client may start)."""
    layout = runtime.layout_from_context(context)
    if (failure := backend_failure(event)) is not None:
        raise failure
    return layout.backend_jobset


def stop_backend(op: RunClusterOperator, context: Context) -> bool:
    """Deletes the backend JobSet (it holds the TPUs); already gone is fine.

    The reward sensor deletes it when its wait ends, and cleanup_kubernetes deletes it in any
    run, so this step only makes sure, after a successful wait, before the gate and export.
    """
    layout = runtime.layout_from_context(context)
    deleted = delete_backend(op.custom.api_client, layout.settings.namespace, layout.backend_jobset)
    op.log.info("Backend %s %s.", layout.backend_jobset, "deleted" if deleted else "already gone")
    return deleted


def cleanup_kubernetes(op: RunClusterOperator, context: Context) -> dict[str, list[str]]:
    """Deletes every Job, JobSet and Secret labelled with this run; each part runs regardless."""
    try:
        layout = runtime.layout_from_context(context)
    except SettingsError as err:
        raise AirflowSkipException(f"settings invalid, so nothing was created: {err}") from err
    removed, errors = remove_run_objects(op, layout)
    if errors:
        raise AirflowException("cleanup incomplete (retrying is safe): " + "; ".join(errors))
    return removed


def remove_run_objects(
    op: RunClusterOperator, layout: RunLayout
) -> tuple[dict[str, list[str]], list[str]]:
    """Delete the run's JobSets, Jobs and Secrets: what was removed, and what went wrong."""
    namespace = layout.settings.namespace
    selector = (
        f"{RUN_LABEL}={layout.slug},{deployment.DEPLOYMENT_LABEL}={deployment.deployment_id()}"
    )
    removed, errors = sweep(op.custom.api_client, namespace, selector)
    op.log.info("Removed from %s: %s", namespace, removed)
    return removed, errors


STEPS: dict[str, Callable[[Any, Any], Any]] = {
    "hf_token_secret": hf_token_secret,
    "start_backend": start_backend,
    "stop_backend": stop_backend,
    "cleanup_kubernetes": cleanup_kubernetes,
}
RESUMES: dict[str, Callable[[Any, Any, dict[str, Any]], Any]] = {"start_backend": backend_started}
