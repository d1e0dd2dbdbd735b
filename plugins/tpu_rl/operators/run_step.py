"""What every step of the run shares: its declaration (task id, doc, limit; console links are
the operator's `operator_extra_links`), the run's limits applied before execute, the run's
layout loaded once per task, and the run's cluster as a GKE operator's default."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import BaseOperator

from tpu_rl import deployment
from tpu_rl.operators import RUN_CLUSTER

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tpu_rl.dag.limits import Limit
    from tpu_rl.layout import RunLayout

CLUSTER_FIELDS = ("project_id", "location", "cluster_name")


class RunStep(BaseOperator):
    """The base of the run's steps (first in their bases, before the provider's operator).

    Declared once, as class attributes: `step_id` (the task id, by default), `step_doc` (what
    the step does and what to do when it fails, shown in the UI), `limit` (its time limit
    and tries, from the run's settings) and `pods_of` (the workload its links show). The
    task's retries and parse-time execution_timeout (the defaults' limit) come from `limit`;
    before execute (and before each resume) the run's limit replaces it. A method, not a
    `pre_execute` callable in default_args: Airflow's serializer stores a callable argument's
    source (inspect.getsource) on every parse.
    """

    step_id: ClassVar[str]
    step_doc: ClassVar[str]
    limit: ClassVar[Limit]
    # Whose pods the step's console links show: a Job of the run (a RunLayout.job_names key),
    # BACKEND_PODS for the Pathways JobSet, or None.
    pods_of: ClassVar[str | None] = None
    _layout: tuple[str | None, RunLayout] | None = None

    def __init__(self, **kwargs: Any) -> None:
        from tpu_rl.settings.params import default_settings

        kwargs.setdefault("task_id", str(self.step_id))  # a plain str: a Step is a StrEnum
        kwargs.setdefault("doc_md", self.step_doc)
        kwargs.setdefault("retries", self.limit.retries)
        minutes = self.limit.minutes(default_settings())
        kwargs.setdefault("execution_timeout", timedelta(minutes=minutes))
        super().__init__(**kwargs)

    def pre_execute(self, context: Any) -> None:
        from tpu_rl.dag.run_limits import apply_run_limits

        super().pre_execute(context)
        apply_run_limits(context, lambda: self.run_layout(context).settings)
        self.look_at_tpu_nodes(context)

    def look_at_tpu_nodes(self, context: Any) -> None:
        """A step on the run's cluster (a GKE operator) records the TPU nodes it sees, for the
        cost (tpu_rl.report.tpu_nodes); a failed look costs the step nothing."""
        from airflow.providers.google.cloud.operators.kubernetes_engine import GKEOperatorMixin

        if not isinstance(self, GKEOperatorMixin):
            return
        from tpu_rl.report.tpu_nodes import record_look

        try:
            s = self.run_layout(context).settings
            record_look(
                context["ti"], self.task_id, self.hook.core_v1_client, s.tpu_type, s.topology
            )
        except Exception as err:  # the cluster may be gone, or not made yet
            self.log.info("TPU nodes not seen (%s): the cost may miss this moment.", err)

    def run_layout(self, context: Any) -> RunLayout:
        """The run's layout (validation errors raise SettingsError), loaded once per run id."""
        from tpu_rl.dag import runtime

        run_id = context.get("run_id")
        if self._layout is None or self._layout[0] != run_id:
            self._layout = (run_id, runtime.layout_from_context(context))
        return self._layout[1]


class OnRunCluster(RunStep):
    """A GKE step (GKEOperatorMixin) on the run's cluster unless one is named, with the
    deployment's connection."""

    def __init__(
        self,
        *,
        gcp_conn_id: str | None = None,
        impersonation_chain: str | Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        cluster = {**RUN_CLUSTER, **kwargs}
        super().__init__(**{k: v for k, v in cluster.items() if k not in CLUSTER_FIELDS})
        self.project_id = cluster["project_id"]
        self.location = cluster["location"]
        self.cluster_name = cluster["cluster_name"]
        self.gcp_conn_id = gcp_conn_id or deployment.gcp_conn_id()
        self.impersonation_chain = impersonation_chain
        self.use_internal_ip = False
        self.use_dns_endpoint = False
