"""RewardSensor: deferral with a fixed deadline, the XCom result, errors, reschedule mode.

Seams patched: the GKE control plane (GKEHook.get_cluster returns the emulator's endpoint
and CA, as GKE's API would) and Google credentials (get_token). The rest is HTTPS.
"""

import asyncio
import datetime as dt
import time
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import (
    AirflowFailException,
    AirflowSensorTimeout,
    TaskDeferred,
)

try:
    from airflow.sdk.exceptions import AirflowRescheduleException
except ImportError:  # task-sdk 1.1 (Airflow 3.1) raises Airflow core's
    from airflow.exceptions import AirflowRescheduleException

from tests.support.kube_wait import JOB, NS, C, make_job, make_pod, post, pre, step
from tests.support.reward_sensor import FakeTI, StateStore, context, sensor
from tpu_rl.rewards.sensor import DEADLINE_KEY, POSITION_KEY
from tpu_rl.rewards.trigger import RewardTrigger


def test_defers_with_cluster_from_gke_and_a_deadline_fixed_at_first_start(gke_emu):
    store = StateStore()
    with pytest.raises(TaskDeferred) as deferred:
        sensor(backend_jobset_name="gemma4-pw", pending_timeout=900).execute(context(store))
    trigger = deferred.value.trigger
    assert isinstance(trigger, RewardTrigger)
    classpath, kwargs = trigger.serialize()
    assert classpath == "tpu_rl.rewards.trigger.RewardTrigger"
    assert kwargs["cluster_url"] == gke_emu.url and kwargs["ssl_ca_cert"] == gke_emu.ca_b64
    assert kwargs["backend_jobset_name"] == "gemma4-pw" and kwargs["pending_timeout"] == 900
    assert abs(kwargs["deadline"] - (time.time() + 60)) < 5
    assert store.values[DEADLINE_KEY] == kwargs["deadline"]
    assert deferred.value.method_name == "execute_complete"
    assert deferred.value.timeout.total_seconds() > 60
    assert gke_emu.cluster_calls == ["demo-project/us-east5/gemma4-rl"]

    time.sleep(0.05)  # a retry later: same deadline, not a new one
    with pytest.raises(TaskDeferred) as again:
        sensor().execute(context(store))
    assert again.value.trigger.serialize()[1]["deadline"] == kwargs["deadline"]


def test_deadline_already_passed_on_retry(gke_emu):
    store = StateStore()
    store.set(DEADLINE_KEY, time.time() - 1)
    with pytest.raises(AirflowSensorTimeout):
        sensor().execute(context(store))


def test_deferred_run_end_to_end(gke_emu):
    make_job(gke_emu)
    make_pod(gke_emu, "train-a")
    gke_emu.append_log(NS, "train-a", C, pre() + step(10) + post())
    task = sensor()
    with pytest.raises(TaskDeferred) as deferred:
        task.execute(context(StateStore()))

    async def first_event() -> dict[str, Any]:
        async for event in deferred.value.trigger.run():
            return event.payload
        raise AssertionError("no event")

    event = asyncio.run(asyncio.wait_for(first_event(), 10))
    result = task.execute_complete(context(), event)
    assert set(result) == {"pre", "post", "post_time"}
    assert result["pre"]["corr"] == 7 and result["post"]["mean_reward"] == 0.1234
    assert result["post_time"].endswith("Z")


def test_reschedule_mode_keeps_its_position_between_pokes(gke_emu):
    make_job(gke_emu)
    make_pod(gke_emu, "train-a")
    gke_emu.append_log(NS, "train-a", C, pre() + step(10))
    store = StateStore()
    first = sensor(deferrable=False)
    assert first.mode == "reschedule"
    with pytest.raises(AirflowRescheduleException):
        first.execute(context(store))
    position = store.values[POSITION_KEY]
    assert position["pre"]["corr"] == 7 and position["last_time"]

    gke_emu.append_log(NS, "train-a", C, step(20) + post())
    result = sensor(deferrable=False).execute(context(store))  # a new process per poke
    assert result["post"]["corr"] == 12 and result["pre"]["corr"] == 7
    reads = [r for r in gke_emu.requests if r.path.endswith("/log")]
    assert len(reads) == 2 and "sinceTime" in reads[1].query


def test_reschedule_mode_fails_fast(gke_emu):
    make_job(gke_emu)
    make_pod(gke_emu, "train-a")
    gke_emu.set_job_condition(NS, JOB, "Failed", reason="DeadlineExceeded")
    with pytest.raises(AirflowFailException, match="DeadlineExceeded"):
        sensor(deferrable=False).execute(context(StateStore()))


def test_reschedule_mode_rides_out_a_server_error(gke_emu):
    make_job(gke_emu)
    make_pod(gke_emu, "train-a")
    gke_emu.append_log(NS, "train-a", C, post())
    gke_emu.inject_faults(503, 1)
    store = StateStore()
    with pytest.raises(AirflowRescheduleException):
        sensor(deferrable=False).execute(context(store))
    assert sensor(deferrable=False).execute(context(store))["post"]["corr"] == 12


def test_without_a_state_store_the_deadline_counts_from_the_first_reschedule(gke_emu):
    make_job(gke_emu)
    make_pod(gke_emu, "train-a")
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=120)
    with pytest.raises(AirflowSensorTimeout, match="timeout"):
        sensor(deferrable=False).execute(context(ti=FakeTI(first_reschedule=long_ago)))
