"""The janitor's I/O: GKE clusters, their labelled Kubernetes objects, and run states."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException
from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEHook
from airflow.sdk import BaseOperator
from google.cloud.container_v1.types import Cluster
from kubernetes.client import ApiClient

from tpu_rl.janitor.params import JanitorParams, JanitorParamsError
from tpu_rl.names import DAG_ID, Step

# The janitor's rules (tpu_rl.janitor: the cluster blueprint's labels, TPU facts) and the swept
# kinds are imported where the sweep runs, not on every parse of the janitor's DAG file.
if TYPE_CHECKING:
    from airflow.sdk import Context

    from tpu_rl.janitor.rules import KubeObject

FINISHED = {"success", "failed", "skipped", "upstream_failed", "removed"}
REACHABLE = {Cluster.Status.RUNNING, Cluster.Status.RECONCILING, Cluster.Status.DEGRADED}
BUSY = {Cluster.Status.PROVISIONING, Cluster.Status.STOPPING}
PARAMS_VARIABLE = "tpu_rl_janitor_params"


class RunStates:
    """What the janitor knows of tpu_rl_post_training's runs, through the Task SDK."""

    def __init__(self, ti: Any) -> None:
        self.ti = ti
        self._active: dict[str, bool] = {}

    def is_active(self, run_id: str) -> bool:
        """Queued or running; a run deleted from the UI is not."""
        from tpu_rl.janitor.rules import ACTIVE_STATES

        if run_id not in self._active:
            count = self.ti.get_dr_count(dag_id=DAG_ID, run_ids=[run_id], states=ACTIVE_STATES)
            self._active[run_id] = count > 0
        return self._active[run_id]

    def active_clusters(self) -> tuple[dict[str, str], str | None]:
        """{cluster: run_id} of active runs, or why an active run's cluster is not known."""
        from tpu_rl.janitor.rules import ACTIVE_STATES

        states = self.ti.get_task_states(dag_id=DAG_ID, task_ids=[Step.CLEANUP_CLUSTER])
        active = [
            run_id
            for run_id, tasks in states.items()
            if tasks.get(Step.CLEANUP_CLUSTER) not in FINISHED and self.is_active(run_id)
        ]
        total = self.ti.get_dr_count(dag_id=DAG_ID, states=ACTIVE_STATES)
        if total > len(active):
            return {}, f"{total - len(active)} active run(s) not found yet"
        clusters = {}
        for run_id in active:
            settings = self.ti.xcom_pull(task_ids=Step.VALIDATE, dag_id=DAG_ID, run_id=run_id)
            if not isinstance(settings, dict):
                return {}, f"active run {run_id} has not validated its settings yet"
            clusters[settings["cluster_name"]] = run_id
        return clusters, None


class KubeApi:
    """Lists and deletes one cluster's labelled objects of the swept kinds (tpu_rl.kube.swept)."""

    def __init__(self, cluster: Cluster, gcp_conn_id: str, namespace: str) -> None:
        from tpu_rl.kube.cluster_client import cluster_api_client

        self.client: ApiClient = cluster_api_client(cluster, gcp_conn_id)
        self.namespace = namespace

    def list(self, kind: str) -> list[dict[str, Any]]:
        """Metadata (JSON form) of the labelled objects of a kind; no JobSet CRD: none.

        Only metadata is kept: a Secret's data never leaves this call."""
        from tpu_rl.janitor import rules as janitor
        from tpu_rl.kube.swept import list_labelled

        return list_labelled(self.client, kind, self.namespace, janitor.managed_selector())

    def delete(self, kind: str, name: str) -> bool:
        """Delete as the swept kinds' table says; False when already gone."""
        from tpu_rl.kube.swept import delete_labelled

        return delete_labelled(self.client, kind, self.namespace, name)


def list_region_clusters(p: JanitorParams) -> list[Cluster]:
    """Every GKE cluster of the project in the region (regional or in one of its zones)."""
    hook = GKEHook(gcp_conn_id=p.gcp_conn_id, location=p.region)
    response = hook.get_cluster_manager_client().list_clusters(
        parent=f"projects/{p.project}/locations/-"
    )
    return [
        c
        for c in response.clusters
        if c.location == p.region or c.location.startswith(p.region + "-")
    ]


class Sweep:
    """One pass: what was (or would be) removed, kept and why, and what failed."""

    def __init__(self, p: JanitorParams, runs: RunStates, log: Any) -> None:
        self.p, self.runs, self.log = p, runs, log
        self.now = datetime.now(UTC)
        self.removed: list[str] = []
        self.kept: dict[str, str] = {}
        self.failed: dict[str, str] = {}
        self.in_use: set[str] = set()  # clusters holding an active run's objects
        self.unlisted: set[str] = set()  # clusters whose objects could not be listed

    def objects(self, cluster: Cluster) -> None:
        """Remove one cluster's objects that no active run owns and that outlived the grace."""
        from tpu_rl.janitor import rules as janitor
        from tpu_rl.kube.swept import SWEPT_KINDS

        try:
            api = KubeApi(cluster, self.p.gcp_conn_id, self.p.namespace)
            found = [
                janitor.kube_object(cluster.name, swept.plural, meta)
                for swept in SWEPT_KINDS
                for meta in api.list(swept.plural)
            ]
        except Exception as err:
            self.unlisted.add(cluster.name)
            self.failed[cluster.name] = f"cannot list its objects: {err}"
            return
        for obj in found:
            if obj.owned:
                self.kept[obj.ref] = "removed with its owner"
            elif obj.run_id and self.runs.is_active(obj.run_id):
                self.kept[obj.ref] = f"its run {obj.run_id} is active"
                self.in_use.add(cluster.name)
            elif reason := janitor.too_young(obj.created, self.now, self.p.grace):
                self.kept[obj.ref] = reason
            else:  # no run-id annotation: no run can claim it
                self._remove(api, obj)

    def _remove(self, api: KubeApi, obj: KubeObject) -> None:
        if self.p.dry_run:
            self.removed.append(obj.ref)
            return
        try:
            api.delete(obj.kind, obj.name)
        except Exception as err:
            self.failed[obj.ref] = str(err).splitlines()[0]
            return
        self.removed.append(obj.ref)

    def clusters(
        self, inspected: list[Cluster]
    ) -> tuple[list[str], list[dict[str, Any]], dict[str, str]]:
        """Clusters to destroy, their destroy settings, and why the others stay."""
        from tpu_rl.janitor import rules as janitor
        from tpu_rl.settings.run_settings import SettingsError, load_cluster_settings

        active, unknown = self.runs.active_clusters()
        names, settings, kept = [], [], {}
        for cluster in inspected:
            if reason := self._cluster_keep_reason(cluster, active, unknown):
                kept[cluster.name] = reason
                continue
            values = janitor.destroy_settings(cluster, self.p)
            try:  # as DestroyClusterOperator checks them: what gcluster reads
                load_cluster_settings(values)
            except SettingsError as err:
                self.failed[cluster.name] = f"cannot destroy: {err}"
                continue
            names.append(cluster.name)
            settings.append(values)
        return names, settings, kept

    def _cluster_keep_reason(
        self, cluster: Cluster, active: dict[str, str], unknown: str | None
    ) -> str | None:
        from tpu_rl.janitor import rules as janitor

        name = cluster.name
        if name in self.p.existing_clusters:
            return "listed in existing_clusters: never destroyed"
        if not janitor.is_labelled(name, cluster.resource_labels):
            return "not labelled as a cluster of this deployment's runs: never destroyed"
        if unknown:
            return unknown
        if name in active:
            return f"used by active run {active[name]}"
        if name in self.in_use:
            return "holds an active run's objects"
        if name in self.unlisted:
            return "its objects could not be listed"
        if cluster.status in BUSY:
            return f"status {cluster.status.name}"
        if reason := janitor.too_young(
            janitor.parse_time(cluster.create_time), self.now, self.p.grace
        ):
            return reason
        if not self.p.gcs_bucket:
            self.failed[name] = "cannot destroy: gcs_bucket (its terraform state) is not set"
            return "gcs_bucket not set"
        return None


def run_params(context: Context) -> dict[str, Any]:
    """The Params' defaults, then the JSON Variable tpu_rl_janitor_params, then the run's conf.

    The Variable is read here, when the sweep runs, not on every parse of the DAG file.
    """
    from airflow.sdk import Variable

    conf = context["dag_run"].conf or {}
    defaults = Variable.get(PARAMS_VARIABLE, default={}, deserialize_json=True)
    return {**context["params"], **{k: v for k, v in defaults.items() if k not in conf}}


class JanitorSweepOperator(BaseOperator):
    """Removes leftover objects of the swept kinds and picks the clusters to destroy.

    Deletion failures do not stop the sweep: they are in the report, and the janitor's last
    task fails listing them. Cluster destruction is the next, mapped task.
    """

    ui_color = "#fff2cc"

    def execute(self, context: Context) -> dict[str, Any]:
        from tpu_rl.janitor import rules as janitor

        try:
            p = JanitorParams.from_params(run_params(context))
        except JanitorParamsError as err:
            raise AirflowFailException(str(err)) from err
        if not p.project or not p.region:
            raise AirflowFailException(
                "project and region are required: set them in the Params or in the Variable "
                "tpu_rl_janitor_params"
            )
        sweep = Sweep(p, RunStates(context["ti"]), self.log)
        region = list_region_clusters(p)
        wanted = (
            set(p.clusters)
            if p.clusters
            else {c.name for c in region if janitor.is_labelled(c.name, c.resource_labels)}
        )
        wanted |= set(p.existing_clusters)
        inspected = [c for c in region if c.name in wanted]
        for name in sorted(wanted - {c.name for c in inspected}):
            sweep.kept[name] = f"no such cluster in {p.project}/{p.region}"
        for cluster in inspected:
            if cluster.status in REACHABLE:
                sweep.objects(cluster)
        destroy, settings, clusters_kept = sweep.clusters(inspected)
        verb = "would_" if p.dry_run else ""
        swept = {"project": p.project, "region": p.region, "clusters": sorted(wanted)}
        report = {
            "swept": swept,  # what was looked at: a "none" below is about these
            "dry_run": p.dry_run,
            "grace_minutes": p.grace_minutes,
            f"{verb}remove": sweep.removed,
            f"{verb}destroy": destroy,
            "kept": sweep.kept,
            "clusters_kept": clusters_kept,
            "failed": sweep.failed,
            "destroy_settings": [] if p.dry_run else settings,
        }
        self.log.info(
            "Swept project %s, region %s, clusters: %s",
            p.project,
            p.region,
            ", ".join(swept["clusters"]) or "none labelled by this deployment",
        )
        self.log.info(
            "%s: %s", "Would remove (dry_run)" if p.dry_run else "Removed", sweep.removed or "none"
        )
        self.log.info(
            "%s: %s", "Would destroy (dry_run)" if p.dry_run else "To destroy", destroy or "none"
        )
        for ref, reason in {**sweep.kept, **clusters_kept}.items():
            self.log.info("Kept %s: %s", ref, reason)
        for ref, error in sweep.failed.items():
            self.log.error("Could not remove %s: %s", ref, error)
        return report


def verdict(context: Context) -> dict[str, Any]:
    """The sweep's report with what was destroyed; fails listing whatever could not be removed."""
    ti = context["ti"]
    report = ti.xcom_pull(task_ids="sweep")
    if not isinstance(report, dict):
        raise AirflowException("the sweep failed before it could report: see its log")
    failed = dict(report["failed"])
    if not report["dry_run"]:
        states = ti.get_task_states(
            dag_id=context["dag"].dag_id, task_ids=["destroy_cluster"], run_ids=[context["run_id"]]
        ).get(context["run_id"], {})
        destroyed = []
        for index, name in enumerate(report["destroy"]):
            state = states.get(f"destroy_cluster_{index}")
            if state == "success":
                destroyed.append(name)
            else:
                failed[name] = f"gcluster destroy ended {state}: see destroy_cluster[{index}]"
        report = {**report, "destroyed": destroyed}
    report = {k: v for k, v in report.items() if k != "destroy_settings"}
    if failed:
        raise AirflowException(
            "janitor could not remove: " + "; ".join(f"{k}: {v}" for k, v in failed.items())
        )
    return report
