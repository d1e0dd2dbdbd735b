"""RewardSensor: wait for the training Job's `Post RL Training:` line and return the rewards."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.providers.google.cloud.operators.kubernetes_engine import GKEOperatorMixin
from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue

# What the wait does (tpu_rl.rewards.wait; the trigger: aiohttp, kubernetes_asyncio) is imported
# where it runs, not when the DAG file is parsed.

DEADLINE_KEY = "reward_sensor_deadline"
POSITION_KEY = "reward_sensor_position"
# Retrying the sensor cannot fix these: the training run itself is over.
FINAL_REASONS = (
    "job_failed",
    "pod_failed",
    "backend_failed",
    "completed_without_result",
    "capacity_lost",  # a resume needs the run: RunRewardSensor
)


class RewardSensor(GKEOperatorMixin, BaseSensorOperator):
    """Wait for MaxText's `Post RL Training:` line in the training Job's pod log.

    Returns (XCom) ``{"pre": {...} | None, "post": {...}, "post_time": "<RFC3339>"}`` with
    corr, total, accuracy, partial_accuracy, format_accuracy and mean_reward as numbers.
    Fails fast, with the pod's last log lines, when the Job or its pod fails, the Pathways
    backend JobSet fails, the Job completes without the line, or the pods stay unscheduled
    longer than ``pending_timeout``. ``timeout`` is a total from the first start: retries and
    re-deferrals do not extend it.

    ``deferrable=True`` waits in the triggerer; ``deferrable=False`` pokes (in ``mode``,
    "reschedule" by default) with the same poll logic, keeping its log position between
    pokes in the task state store.
    """

    template_fields: Sequence[str] = (
        *GKEOperatorMixin.template_fields,
        "namespace",
        "job_name",
        "container_name",
        "backend_jobset_name",
    )

    def __init__(
        self,
        *,
        project_id: str,
        location: str,
        cluster_name: str,
        job_name: str,
        namespace: str = "default",
        gcp_conn_id: str = "google_cloud_default",
        impersonation_chain: str | Sequence[str] | None = None,
        use_internal_ip: bool = False,
        use_dns_endpoint: bool = False,
        container_name: str | None = None,
        backend_jobset_name: str | None = None,
        poll_interval: float = 60.0,
        pending_timeout: float = 3600.0,
        timeout: float | timedelta = timedelta(hours=24),
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        if not deferrable:
            kwargs.setdefault("mode", "reschedule")
        super().__init__(poke_interval=poll_interval, timeout=timeout, **kwargs)
        self.project_id = project_id
        self.location = location
        self.cluster_name = cluster_name
        self.job_name = job_name
        self.namespace = namespace
        self.gcp_conn_id = gcp_conn_id
        self.impersonation_chain = impersonation_chain
        self.use_internal_ip = use_internal_ip
        self.use_dns_endpoint = use_dns_endpoint
        self.container_name = container_name
        self.backend_jobset_name = backend_jobset_name
        self.poll_interval = poll_interval
        self.pending_timeout = pending_timeout
        self.deferrable = deferrable
        self.deadline_cap: float | None = None  # epoch seconds no wait may outlast

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        from tpu_rl.rewards.wait import defer_wait

        defer_wait(self, context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Turn the trigger's event into the XCom result or the right exception."""
        from tpu_rl.rewards.wait import result

        return result(self, event)

    def poke(self, context: Context) -> PokeReturnValue:
        from tpu_rl.rewards.wait import poke

        return poke(self, context)
