"""The run's cloud resources outside Kubernetes: its bucket, and its GKE cluster deployed and
destroyed with Cluster Toolkit (`gcluster`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow.providers.google.cloud.operators.gcs import GCSCreateBucketOperator

from tpu_rl.dag.limits import CLEANUP, per_rung, setting_minutes, short_step
from tpu_rl.dag.links import GkeClusterLink
from tpu_rl.names import Step
from tpu_rl.operators import RUN_CLUSTER
from tpu_rl.operators.run_step import RunStep

if TYPE_CHECKING:
    import subprocess

    from airflow.sdk import Context

    from tpu_rl.cluster.blueprint import ClusterToolkitPlan
    from tpu_rl.settings.fields import RunSettings


class EnsureBucketOperator(RunStep, GCSCreateBucketOperator):
    """The provider's bucket creation (unless it exists), under the run's limits; by default
    the run's bucket, in its region, with uniform bucket-level access, public access
    prevention and versioning (tpu_rl.bucket). An existing bucket without them is used as it
    is, with a warning naming each and how to add it: it is not the run's to change (uniform
    access drops its object ACLs, versioning changes its bill), and the run works without them.
    """

    step_id = Step.ENSURE_BUCKET
    step_doc = """
Creates the `gcs_bucket` in `region` unless it exists, with uniform bucket-level access, public
access prevention and object versioning (noncurrent versions deleted after 7 days).
Checkpoints, the export and the cluster's terraform state live there. An existing bucket
without these is used as it is; the log warns what it lacks and how to add it.

**Failed?** Usually the connection's account lacks `storage.buckets.create`, or the name is
taken by another project.
"""
    limit = short_step(2)

    def __init__(self, **kwargs: Any) -> None:
        run_bucket = {
            "bucket_name": "{{ params.gcs_bucket }}",
            "project_id": RUN_CLUSTER["project_id"],
            "location": RUN_CLUSTER["location"],  # the cluster's region
            "storage_class": "STANDARD",  # the operator's MULTI_REGIONAL is refused in a region
        }
        super().__init__(**{**run_bucket, **kwargs})

    def execute(self, context: Context) -> None:
        from tpu_rl.bucket import BUCKET_RESOURCE

        if self.resource is None:
            self.resource = BUCKET_RESOURCE
        super().execute(context)
        self.warn_of_missing_protections()

    def warn_of_missing_protections(self) -> None:
        """Read the bucket as it now is and warn of each protection it lacks."""
        from airflow.providers.google.cloud.hooks.gcs import GCSHook
        from google.api_core.exceptions import Forbidden

        from tpu_rl.bucket import missing_protections

        hook = GCSHook(gcp_conn_id=self.gcp_conn_id, impersonation_chain=self.impersonation_chain)
        try:
            bucket = hook.get_conn().get_bucket(self.bucket_name)
        except Forbidden as err:  # object roles only: the run may still work
            self.log.warning("Cannot read bucket %s's settings: %s", self.bucket_name, err)
            return
        for missing in missing_protections(bucket):
            self.log.warning("Existing bucket %s: %s", self.bucket_name, missing)


class ClusterToolkitOperator(RunStep):
    """A `gcluster` command on a cluster; re-running it is safe.

    `settings`: the cluster's settings, labelled with this deployment's identity (the janitor's
    destroy), checked only for what gcluster reads of them (validation.CLUSTER_RULES); None: the
    run's (its Params), with the identity the run started with. Nothing is done to a cluster the
    settings do not own (`cluster_mode=existing`).
    """

    template_fields: Sequence[str] = ("settings", "gcp_conn_id", "state_prefix")
    template_fields_renderers = {"settings": "json"}

    def __init__(
        self,
        *,
        settings: Mapping[str, Any] | None = None,
        gcp_conn_id: str | None = None,
        state_prefix: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.settings = settings
        self.gcp_conn_id = gcp_conn_id
        self.state_prefix = state_prefix
        self._proc: subprocess.Popen[str] | None = None

    def commands(self, steps: ClusterToolkitPlan) -> list[list[str]]:
        """The gcluster command lines to run, in the deployment's folder."""
        raise NotImplementedError

    def skip_reason(self, settings: RunSettings) -> str | None:
        """Why the command must leave the cluster alone, if it must."""
        if settings.cluster_mode == "existing":
            return "cluster_mode=existing: the cluster is not this run's"
        return None

    def execute(self, context: Context) -> None:
        """Run the commands for the cluster of the settings (a skip when they are invalid or
        the cluster is not this run's to change)."""
        from airflow.providers.common.compat.sdk import AirflowSkipException

        from tpu_rl import deployment
        from tpu_rl.cluster import blueprint
        from tpu_rl.cluster.ownership import foreign_cluster
        from tpu_rl.cluster.session import toolkit_bundle, toolkit_session
        from tpu_rl.dag.run_limits import time_left
        from tpu_rl.settings.run_settings import (
            SettingsError,
            load_cluster_settings,
            load_settings,
        )

        # a cluster's own settings are checked for what gcluster reads; a run's, as a run
        raw, load = (
            (self.settings, load_cluster_settings)
            if self.settings is not None
            else (context["params"], load_settings)
        )
        try:
            settings = load(dict(raw))
            identity = self.identity(context)
        except SettingsError as err:
            raise AirflowSkipException(f"settings invalid, so no cluster was made: {err}") from err
        if reason := self.skip_reason(settings):
            self.log.info("Nothing to do: %s", reason)
            return
        bundle = toolkit_bundle(settings)
        prefix = self.state_prefix or blueprint.default_state_prefix(settings)
        self.log.info(
            "Cluster %s, terraform state gs://%s/%s",
            settings.cluster_name,
            settings.gcs_bucket,
            prefix,
        )
        conn_id = self.gcp_conn_id or deployment.check_gcp_connection()
        if foreign := foreign_cluster(settings, conn_id, identity):
            self.leave_foreign_cluster(foreign)
            return
        timeout = settings.cluster_timeout_minutes * 60.0
        if (left := time_left(self)) is not None:  # the run's deadline may come first
            timeout = min(timeout, left.total_seconds())
        with toolkit_session(
            bundle, settings.project, identity, conn_id, prefix, timeout, self.log, self._started
        ) as gcluster:
            self.apply(context, settings, lambda on: gcluster(on, self.commands))

    def apply(
        self, context: Context, settings: RunSettings, gcluster: Callable[[RunSettings], None]
    ) -> None:
        """Run the commands (`gcluster`) on the cluster of the run's settings."""
        gcluster(settings)

    def leave_foreign_cluster(self, why: str) -> None:
        """What the command does about a cluster of another deployment: nothing (a teardown)."""
        self.log.warning("Cluster left alone: %s", why)

    def identity(self, context: Context) -> str:
        """The deployment identity the cluster's labels carry."""
        from tpu_rl import deployment
        from tpu_rl.dag.runtime import run_deployment

        return deployment.deployment_id() if self.settings is not None else run_deployment(context)

    def _started(self, proc: subprocess.Popen[str]) -> None:
        self._proc = proc

    def on_kill(self) -> None:
        from tpu_rl.cluster import toolkit as cluster_toolkit

        if self._proc is not None:
            cluster_toolkit.stop(self._proc)


class CreateClusterOperator(ClusterToolkitOperator):
    """`gcluster deploy` of the edited tutorial blueprint (-w: re-running is safe)."""

    step_id = Step.CREATE_CLUSTER
    step_doc = """
Deploys the tutorial's GKE cluster with Cluster Toolkit (`gcluster deploy`) on the TPU capacity
in `capacity` (the reservation in `reservation`, flex-start or Spot; with `calendar`, it first
waits, deferred, for the calendar reservation's window to open); does nothing with
`cluster_mode=existing`. Safe to re-run. With a `capacity_ladder`, a rung GKE refuses for lack
of capacity (a stockout, an exhausted pool) is released and the next rung deployed; the log
says each change with GKE's own error text. Its time limit is `cluster_timeout_minutes` for
each rung, every rung's deploy within `cluster_timeout_minutes` of its own start.

**Failed?** The log holds gcluster's and terraform's output: quota, reservation name or zone,
or missing IAM roles are the usual causes; with `capacity=spot`, a stockout (the Spot pool is
static: no VMs, no cluster). `cleanup_cluster` still removes what was created.
"""
    limit = per_rung("cluster_timeout_minutes", 2)
    operator_extra_links = (GkeClusterLink(),)

    def commands(self, steps: ClusterToolkitPlan) -> list[list[str]]:
        return [steps.deploy]

    def execute(self, context: Context) -> None:
        """Deploy; on a calendar reservation whose window is still to come, wait in the
        triggerer for its start first (its reservation, and its VMs, exist only from then)."""
        if (opens := self.window_opens(context)) is not None:
            from airflow.providers.standard.triggers.temporal import DateTimeTrigger

            self.log.info("Waiting in the triggerer for the calendar window to open at %s", opens)
            self.defer(trigger=DateTimeTrigger(opens), method_name="window_opened")
        return super().execute(context)

    def window_opened(self, context: Context, event: Any = None) -> None:
        return self.execute(context)

    def window_opens(self, context: Context) -> datetime | None:
        """When the run's calendar reservation window opens, if it is still to come."""
        from tpu_rl.preflight.calendar_reservation import calendar_window
        from tpu_rl.settings.choices import ClusterMode
        from tpu_rl.settings.run_settings import SettingsError, load_settings

        try:
            s = load_settings(dict(self.settings or context["params"]))
        except SettingsError:
            return None  # execute skips, saying why
        if s.cluster_mode == ClusterMode.EXISTING:
            return None
        window = calendar_window(s, self.gcp_conn_id)
        if window is None or window.start <= time.time():
            return None
        return datetime.fromtimestamp(window.start, UTC)

    def apply(
        self, context: Context, settings: RunSettings, gcluster: Callable[[RunSettings], None]
    ) -> None:
        """Deploy on the capacity ladder's rungs in turn until one gets the slice (a calendar
        reservation's pool in the reservation it delivered)."""
        from tpu_rl.cluster.climb import climb
        from tpu_rl.cluster.rung_record import write_tries
        from tpu_rl.preflight.calendar_reservation import delivered_settings

        def record(tries: list[dict[str, Any]]) -> None:  # with a ladder only
            write_tries(context["ti"], tries)

        climb(delivered_settings(settings, self.gcp_conn_id), gcluster, self.log, record)

    def leave_foreign_cluster(self, why: str) -> None:
        from airflow.providers.common.compat.sdk import AirflowFailException

        raise AirflowFailException(why)


class DestroyClusterOperator(ClusterToolkitOperator):
    """`gcluster destroy` of the cluster: the deployment folder is rebuilt first (`gcluster
    create`), so it works from any worker, after a half-way deploy, and when nothing is left.
    A cluster the settings keep (`keep_cluster`) stays."""

    step_id = Step.CLEANUP_CLUSTER
    step_doc = """
A teardown: runs however the run ends once the bucket (terraform's state) exists, so a
half-deployed cluster is destroyed too. Destroys the cluster this run created
(`gcluster destroy`), unless `keep_cluster` is set or the cluster was an existing one.

**Failed?** The cluster still bills: re-run this task, or let `tpu_rl_janitor` destroy it.
"""
    limit = setting_minutes("cluster_timeout_minutes", 4, CLEANUP)
    operator_extra_links = (GkeClusterLink(),)

    def commands(self, steps: ClusterToolkitPlan) -> list[list[str]]:
        return [steps.create, steps.destroy]

    def execute(self, context: Context) -> None:
        """Destroy, then (a run's cleanup, not the janitor's) mark the run's TPUs released: the
        run's cost ends here, whatever waits after (tpu_rl.report.run_cost)."""
        from tpu_rl.report.run_cost import mark_tpus_released

        super().execute(context)
        if self.settings is None:
            mark_tpus_released(context["ti"])

    def skip_reason(self, settings: RunSettings) -> str | None:
        if settings.keep_cluster:
            return "keep_cluster is set: the cluster stays (its TPUs keep billing)"
        return super().skip_reason(settings)
