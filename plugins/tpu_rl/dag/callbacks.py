"""The DAG's on_failure_callback: cleanup when the scheduler timed the run out.

The run's work deadline leaves its teardowns their whole reserve (tpu_rl.dag.run_limits), so a
run whose tasks ran as budgeted has destroyed its cluster before dagrun_timeout. The timeout can
still fall first when tasks waited outside their limits (no executor slot, a scheduler or
worker down). Then the scheduler fails the run and sets every unfinished task, teardowns
included, to skipped (airflow/jobs/scheduler_job_runner.py, _schedule_dag_run, "has
timed-out"); a teardown still running is terminated at its next heartbeat (the execution API
answers 409 "not_running": api_fastapi/execution_api/routes/task_instances.py,
ti_heartbeat; the supervisor then kills the task: sdk/execution_time/supervisor.py). Only this
callback runs after it, in the dag-processor, which kills a callback's process after
`[dag_processor] dag_file_processor_timeout` (50 s by default: dag_processing/manager.py,
_kill_timed_out_processors), far less than `gcluster destroy` takes, and a terraform killed
half-way keeps its state lock. So the callback deletes the run's Kubernetes objects (the
kinds of tpu_rl.kube.swept, the table cleanup_kubernetes and the janitor walk too) and asks GKE
to delete a cluster the run created: one request, which GKE carries out on its own with the
cluster's node pools (the TPUs). What terraform made beside the cluster (network,
service account) is left to the next `gcluster destroy` of that cluster. The graph still shows
the cleanups skipped (the scheduler's word: their code did not run), so the run's note and each
cleanup's own note say what the callback removed in their place (the dag-processor serves the
Airflow API connection they are set through, as it serves the notifier's:
airflow/dag_processing/processor.py, GetConnection).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEHook
    from google.cloud.container_v1.types import Cluster

    from tpu_rl.settings.fields import RunSettings

log = logging.getLogger(__name__)
TIMED_OUT = "failed: timed out (dagrun_timeout)"


def cleanup_after_timeout(context: Any) -> dict[str, Any] | None:
    """Remove the timed-out run's Kubernetes objects and have GKE delete a cluster it created;
    other failures have their teardowns."""
    if context.get("reason") != "timed_out":
        return None
    from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEHook
    from airflow.sdk.execution_time.xcom import XCom

    from tpu_rl import deployment
    from tpu_rl.kube.cluster_client import cluster_api_client
    from tpu_rl.kube.swept import sweep
    from tpu_rl.layout import RunLayout
    from tpu_rl.names import DAG_ID
    from tpu_rl.run_record import (
        SETTINGS_TASK,
        NoRunRecord,
        RecordedBeforeIdentities,
        UnreadableRunRecord,
        recorded_deployment,
        recorded_settings,
    )
    from tpu_rl.settings.run_settings import SettingsError, load_settings

    run_id = context["run_id"]
    raw = XCom.get_one(key="return_value", dag_id=DAG_ID, task_id=SETTINGS_TASK, run_id=run_id)
    try:
        settings = load_settings(recorded_settings(raw))
        identity = recorded_deployment(raw, run_id)  # the run's own, whatever it is now
    except NoRunRecord:
        log.info("Run %s timed out before its settings were validated: nothing to remove", run_id)
        return None
    except (SettingsError, UnreadableRunRecord) as err:  # recorded, but not readable here
        why = " ".join(str(err).split())
        return removed_nothing(run_id, f"{SETTINGS_TASK}'s record of the run is unreadable: {why}")
    except RecordedBeforeIdentities as err:  # objects named by an older version: said, not guessed
        return removed_nothing(run_id, str(err))
    gcp_conn_id = deployment.gcp_conn_id()  # the connection cleanup_kubernetes uses
    hook = GKEHook(gcp_conn_id=gcp_conn_id, location=settings.region)
    removed: dict[str, list[str]] = {}
    errors: list[str] = []
    try:
        found = find_cluster(hook, settings)
        gone = cluster_gone(found)
    except Exception as err:  # credentials, permissions, the API down: still ask to delete
        found, gone = None, None
        errors = [f"cluster {settings.cluster_name} unreachable: {err}"]
    if gone:  # nothing was made on it, or its objects go with it
        cluster = gone
    else:
        if found is not None:
            layout = RunLayout(settings, run_id, identity)
            try:
                client = cluster_api_client(found, gcp_conn_id)
                removed, errors = sweep(client, settings.namespace, layout.run_selector)
            except Exception as err:  # the cluster's API server, credentials
                errors = [f"cluster {settings.cluster_name}'s objects unreachable: {err}"]
        cluster, error = delete_created_cluster(hook, settings, gcp_conn_id, identity)
        errors += [error] if error else []
    report = log.error if errors else log.warning
    report(
        "Run %s timed out: removed %s; cluster %s: %s%s",
        run_id,
        removed,
        settings.cluster_name,
        cluster,
        f"; could not remove: {'; '.join(errors)}" if errors else "",
    )
    outcome = {"removed": removed, "errors": errors, "cluster": cluster}
    note_run(run_id, timeout_note(removed, f"{settings.cluster_name}: {cluster}", errors))
    note_teardowns(run_id, removed, f"{settings.cluster_name}: {cluster}", errors)
    return outcome


def removed_nothing(run_id: str, why: str) -> dict[str, Any]:
    """A timed-out run whose objects cannot be named here: the error, in the log and the note."""
    log.error("Run %s timed out and removed nothing: %s", run_id, why)
    note_run(run_id, timeout_note({}, None, [why]))
    note_teardowns(run_id, {}, None, [why])
    return {"removed": {}, "errors": [why], "cluster": None}


def teardown_notes(
    removed: Mapping[str, list[str]], cluster: str | None, errors: list[str]
) -> dict[str, str]:
    """Each teardown's note: skipped by the timeout, and what the callback did in its place."""
    from tpu_rl.names import Step
    from tpu_rl.report.run_note import NOTE_LIMIT

    objects = "; ".join(f"{kind} {', '.join(names)}" for kind, names in removed.items() if names)
    head = "Skipped by dagrun_timeout; the timeout callback ran in its place."
    failed = [f"Could not remove: {'; '.join(errors)}"] if errors else []
    work = {
        Step.CLEANUP_KUBERNETES: f"Removed: {objects or 'no Kubernetes object'}",
        Step.CLEANUP_CLUSTER: f"Cluster {cluster}" if cluster else "Cluster: not reached",
    }
    return {task: "\n\n".join([head, done, *failed])[:NOTE_LIMIT] for task, done in work.items()}


def note_teardowns(
    run_id: str, removed: Mapping[str, list[str]], cluster: str | None, errors: list[str]
) -> None:
    """Note on each skipped teardown (its task instance) what the callback did in its place."""
    from tpu_rl import deployment
    from tpu_rl.names import DAG_ID
    from tpu_rl.report import run_note

    conn_id = deployment.airflow_api_conn_id()
    for task_id, text in teardown_notes(removed, cluster, errors).items():
        run_note.set_task_note(conn_id, DAG_ID, run_id, task_id, text)


def timeout_note(removed: Mapping[str, list[str]], cluster: str | None, errors: list[str]) -> str:
    """The run's note: the teardowns the graph shows skipped, and what this callback did in
    their place."""
    from tpu_rl.report.run_note import NOTE_LIMIT, RL_PAGE

    objects = "; ".join(f"{kind} {', '.join(names)}" for kind, names in removed.items() if names)
    lines = [
        f"**{TIMED_OUT}**",
        "The cleanups show skipped: the timeout callback ran in their place.",
        f"Removed: {objects or 'no Kubernetes object'}",
        *([f"Cluster {cluster}"] if cluster else []),
        *([f"Could not remove: {'; '.join(errors)}"] if errors else []),
        f"All runs: [RL post-training page]({RL_PAGE})",
    ]
    return "\n\n".join(lines)[:NOTE_LIMIT]


def note_run(run_id: str, text: str) -> None:
    """Set the run's note (tpu_rl.report.run_note: only logged when it cannot be set)."""
    from tpu_rl import deployment
    from tpu_rl.names import DAG_ID
    from tpu_rl.report import run_note

    run_note.set_run_note(deployment.airflow_api_conn_id(), DAG_ID, run_id, text)


def find_cluster(hook: GKEHook, settings: RunSettings) -> Cluster | None:
    """The run's GKE cluster, or None when there is none."""
    from google.api_core.exceptions import NotFound

    try:
        return hook.get_cluster(name=settings.cluster_name, project_id=settings.project)
    except NotFound:
        return None


def cluster_gone(found: Cluster | None) -> str | None:
    """Why the run's cluster needs nothing more (absent, or being deleted), or None."""
    from google.cloud.container_v1.types import Cluster

    if found is None:
        return "not found: never created, or already deleted"
    # STOPPING: "the cluster is being deleted" (container_v1 Cluster.Status), e.g. by the
    # cleanup_cluster try the timeout cut: GKE finishes that deletion on its own
    if found.status == Cluster.Status.STOPPING:
        return "deletion already under way (GKE completes it)"
    return None


def delete_created_cluster(
    hook: Any, settings: RunSettings, gcp_conn_id: str, identity: str
) -> tuple[str, str | None]:
    """Ask GKE to delete the cluster when the run created it (the cleanup_cluster teardown's
    rule: cluster_mode=create without keep_cluster, and labelled with the run's deployment
    `identity`), without waiting: what became of it, and the error if the request failed."""
    from tpu_rl.cluster.ownership import foreign_cluster

    if settings.cluster_mode != "create":
        return "kept: cluster_mode=existing, not the run's", None
    if settings.keep_cluster:
        return "kept: keep_cluster is set (its TPUs keep billing)", None
    try:
        if foreign := foreign_cluster(settings, gcp_conn_id, identity):
            return f"kept: {foreign}", None
        # the provider's delete_cluster answers None on NotFound (gone since the lookup)
        hook.delete_cluster(
            name=settings.cluster_name, project_id=settings.project, wait_to_complete=False
        )
    except Exception as err:  # credentials, permissions, the API down
        return "delete request failed", f"cluster {settings.cluster_name} not deleted: {err}"
    return "deletion started (GKE completes it)", None
