"""What RewardSensor does in the worker: its total deadline, the triggerer's wait or a poke, and
the event turned into the XCom result or the right exception (imported where the wait runs)."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import PokeReturnValue
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSensorTimeout

from tpu_rl.kube.async_client import KubeApiError
from tpu_rl.kube.gke_trigger import connection_of
from tpu_rl.rewards.follower import FollowState
from tpu_rl.rewards.sensor import DEADLINE_KEY, FINAL_REASONS, POSITION_KEY

if TYPE_CHECKING:
    from tpu_rl.rewards.sensor import RewardSensor


def defer_wait(sensor: RewardSensor, context: Any) -> None:
    """Defer to the reward trigger until the total deadline (a timeout when it has passed)."""
    from tpu_rl.rewards.trigger import RewardTrigger  # the triggerer's (aiohttp): when used

    deadline = wait_deadline(sensor, context)
    remaining = deadline - time.time()
    if remaining <= 0:
        raise AirflowSensorTimeout(f"RewardSensor timed out ({sensor.timeout:.0f}s in total)")
    sensor.defer(
        trigger=RewardTrigger(**follow_args(sensor, deadline), poll_interval=sensor.poll_interval),
        method_name="execute_complete",
        # a backstop only: the trigger reports the timeout itself, with the last log lines
        timeout=timedelta(seconds=remaining + 2 * sensor.poll_interval + 60),
    )


def poke(sensor: RewardSensor, context: Any) -> PokeReturnValue:
    """One poll of the log, resumed from the position kept in the task state store."""
    from tpu_rl.rewards.poll import LogFollower

    store = context.get("task_state_store")
    state = FollowState.from_dict(store.get(POSITION_KEY) if store else None)
    args = follow_args(sensor, wait_deadline(sensor, context))
    follower = LogFollower(**args, state=state, log=sensor.log)
    try:
        event = asyncio.run(follower.poll())
    except KubeApiError as error:  # 429/5xx: the next poke tries again
        sensor.log.warning("Kubernetes API: %s; poking again later", error)
        event = None
    if store:
        store.set(POSITION_KEY, follower.state.as_dict())
    if event is None:
        return PokeReturnValue(is_done=False)
    return PokeReturnValue(is_done=True, xcom_value=result(sensor, event))


def follow_args(sensor: RewardSensor, deadline: float) -> dict[str, Any]:
    """What to follow, and how: the trigger's and the poke's follower arguments."""
    return {
        **connection_of(sensor),
        "namespace": sensor.namespace,
        "job_name": sensor.job_name,
        "deadline": deadline,
        "container_name": sensor.container_name,
        "backend_jobset_name": sensor.backend_jobset_name,
        "pending_timeout": sensor.pending_timeout,
    }


def wait_deadline(sensor: RewardSensor, context: Any) -> float:
    """Epoch seconds of the total timeout, fixed at the first start of the first try, and no
    later than the sensor's `deadline_cap`.

    Kept in the task state store, which outlives retries, reschedules and deferrals. Without a
    store (older Airflow) it counts from the first reschedule, else from now.
    """
    total = _total_deadline(sensor, context)
    return total if sensor.deadline_cap is None else min(total, sensor.deadline_cap)


def _total_deadline(sensor: RewardSensor, context: Any) -> float:
    store = context.get("task_state_store")
    stored = store.get(DEADLINE_KEY) if store else None
    if isinstance(stored, (int, float)):
        return float(stored)
    first = context["ti"].get_first_reschedule_date(context) if sensor.reschedule else None
    started = first.timestamp() if first else time.time()
    deadline = started + sensor.timeout
    if store:
        store.set(DEADLINE_KEY, deadline)
    return deadline


def result(sensor: RewardSensor, event: dict[str, Any]) -> dict[str, Any]:
    """The trigger's or a poke's event as the XCom result, or the right exception."""
    if event.get("status") == "success":
        post = event["post"]
        sensor.log.info(
            "Post RL Training at %s: mean_reward=%s accuracy=%s%% (pre: %s)",
            event.get("post_time"),
            post.get("mean_reward"),
            post.get("accuracy"),
            event.get("pre"),
        )
        return {"pre": event.get("pre"), "post": post, "post_time": event.get("post_time")}
    reason = event.get("reason", "unknown")
    message = f"[{reason}] {event.get('message', '')}"
    if reason == "timeout":
        raise AirflowSensorTimeout(message)
    if reason in FINAL_REASONS:
        raise AirflowFailException(message)
    raise AirflowException(message)
