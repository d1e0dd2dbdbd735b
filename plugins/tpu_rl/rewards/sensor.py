"""RewardSensor: wait for the training Job's `Post RL Training:` line and return the rewards."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.providers.google.cloud.operators.kubernetes_engine import GKEOperatorMixin
from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue

if TYPE_CHECKING:
    from tpu_rl.watch.rules import WatchRules

# What the wait uses (the trigger: aiohttp, kubernetes_asyncio; the log follower) is imported
# where it runs, not when the DAG file is parsed.

DEADLINE_KEY = "reward_sensor_deadline"
POSITION_KEY = "reward_sensor_position"


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
        self.keep_backend = False  # a successful wait leaves the backend running (RewardTrigger)
        # what stops training or says its progress: the rules' defaults unless the task sets
        # them from the run's settings (JSON in the follower's arguments: follow_args)
        self.watch: WatchRules | None = None
        self.tensorboard_dir: str | None = None  # the run's event files (rewards.event_files)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        self.defer_wait(context)

    def defer_wait(self, context: Context, state: dict[str, Any] | None = None) -> NoReturn:
        """Defer to the reward trigger until the total deadline (a timeout when it has passed),
        from the follower's `state` when given (a wait that reported progress goes on)."""
        from airflow.providers.common.compat.sdk import AirflowSensorTimeout

        from tpu_rl.rewards.trigger import RewardTrigger  # the triggerer's (aiohttp): when used

        deadline = self.wait_deadline(context)
        remaining = deadline - time.time()
        if remaining <= 0:
            raise AirflowSensorTimeout(f"RewardSensor timed out ({self.timeout:.0f}s in total)")
        self.defer(
            trigger=RewardTrigger(
                **self.follow_args(deadline),
                poll_interval=self.poll_interval,
                keep_backend=self.keep_backend,
                state=state,
            ),
            method_name="execute_complete",
            # a backstop only: the trigger reports the timeout itself, with the last log lines
            timeout=timedelta(seconds=remaining + 2 * self.poll_interval + 60),
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Turn the trigger's event into the XCom result or the right exception."""
        return self.result(event)

    def poke(self, context: Context) -> PokeReturnValue:
        """One poll of the log, resumed from the position kept in the task state store."""
        from tpu_rl.kube.async_client import KubeApiError
        from tpu_rl.rewards.poll import LogFollower
        from tpu_rl.watch.state import FollowState

        store = context.get("task_state_store")
        saved = store.get(POSITION_KEY) if store else None
        state = FollowState.from_dict(saved if isinstance(saved, dict) else None)
        args = self.follow_args(self.wait_deadline(context))
        follower = LogFollower(**args, state=state, log=self.log)
        try:
            event = asyncio.run(follower.poll())
        except KubeApiError as error:  # 429/5xx: the next poke tries again
            self.log.warning("Kubernetes API: %s; poking again later", error)
            event = None
        if store:
            store.set(POSITION_KEY, follower.state.as_dict())
        if event is None:
            return PokeReturnValue(is_done=False)
        return PokeReturnValue(is_done=True, xcom_value=self.result(event))

    def follow_args(self, deadline: float) -> dict[str, Any]:
        """What to follow, and how: the trigger's and the poke's follower arguments."""
        from tpu_rl.kube.gke_trigger import connection_of

        return {
            **connection_of(self),
            "namespace": self.namespace,
            "job_name": self.job_name,
            "deadline": deadline,
            "container_name": self.container_name,
            "backend_jobset_name": self.backend_jobset_name,
            "pending_timeout": self.pending_timeout,
            "watch": self.watch.as_dict() if self.watch is not None else None,
            "tensorboard_dir": self.tensorboard_dir,
            "tensorboard_every_s": self.poll_interval,
        }

    def wait_deadline(self, context: Context) -> float:
        """Epoch seconds of the total timeout, fixed at the first start of the first try, and
        no later than the sensor's `deadline_cap`.

        Kept in the task state store, which outlives retries, reschedules and deferrals.
        Without a store (older Airflow) it counts from the first reschedule, else from now.
        """
        total = self._total_deadline(context)
        return total if self.deadline_cap is None else min(total, self.deadline_cap)

    def _total_deadline(self, context: Context) -> float:
        store = context.get("task_state_store")
        stored = store.get(DEADLINE_KEY) if store else None
        if isinstance(stored, (int, float)):
            return float(stored)
        first = context["ti"].get_first_reschedule_date(context) if self.reschedule else None
        started = first.timestamp() if first else time.time()
        deadline = started + self.timeout
        if store:
            store.set(DEADLINE_KEY, deadline)
        return deadline

    def result(self, event: dict[str, Any]) -> dict[str, Any]:
        """The trigger's or a poke's event as the XCom result, or the right exception."""
        from airflow.providers.common.compat.sdk import (
            AirflowException,
            AirflowFailException,
            AirflowSensorTimeout,
        )

        from tpu_rl.watch.ends import FINAL, WaitEnd

        if event.get("status") == "success":
            post = event["post"]
            self.log.info(
                "Post RL Training at %s: mean_reward=%s accuracy=%s%% (pre: %s)",
                event.get("post_time"),
                post.get("mean_reward"),
                post.get("accuracy"),
                event.get("pre"),
            )
            return {"pre": event.get("pre"), "post": post, "post_time": event.get("post_time")}
        reason = event.get("reason", "unknown")
        message = f"[{reason}] {event.get('message', '')}"
        if reason == WaitEnd.TIMEOUT:
            raise AirflowSensorTimeout(message)
        if reason in FINAL:
            raise AirflowFailException(message)
        raise AirflowException(message)
