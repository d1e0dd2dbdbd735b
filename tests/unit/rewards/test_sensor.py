"""RewardSensor's decisions without the cluster (tpu_rl.rewards.sensor): how each ending event
is raised, the success's XCom, the total deadline kept across tries, what it follows. The
deferral, pokes and log against the API emulator: tests/integration/test_reward_sensor.py."""

from __future__ import annotations

import datetime as dt

import pytest
from airflow.providers.common.compat.sdk import (
    AirflowException,
    AirflowFailException,
    AirflowSensorTimeout,
)

from tests.support.kube_wait import JOB
from tests.support.reward_sensor import FakeTI, StateStore, context, sensor
from tpu_rl.rewards.sensor import DEADLINE_KEY, RewardSensor


def test_job_name_is_templated():
    assert "job_name" in RewardSensor.template_fields
    assert {"cluster_name", "location", "project_id"} <= set(RewardSensor.template_fields)


@pytest.mark.parametrize(
    ("reason", "exception"),
    [
        ("job_failed", AirflowFailException),
        ("pod_failed", AirflowFailException),
        ("backend_failed", AirflowFailException),
        ("completed_without_result", AirflowFailException),
        ("unschedulable", AirflowException),
        ("api_error", AirflowException),
        ("timeout", AirflowSensorTimeout),
    ],
)
def test_error_events_raise(reason, exception):
    event = {"status": "error", "reason": reason, "message": "pod train-a: last lines"}
    with pytest.raises(exception, match=reason) as raised:
        sensor().execute_complete(context(), event)
    if exception is AirflowException:  # retryable: not a fail-fast subclass
        assert not isinstance(raised.value, (AirflowFailException, AirflowSensorTimeout))


def test_a_success_is_the_pre_and_post_lines_and_the_post_time():
    event = {
        "status": "success",
        "pre": {"mean_reward": 0.1},
        "post": {"mean_reward": 0.2, "accuracy": 30.0},
        "post_time": "2027-01-01T00:00:00Z",
        "intermediate": [{"step": 5}],
    }
    assert sensor().execute_complete(context(), event) == {
        "pre": {"mean_reward": 0.1},
        "post": {"mean_reward": 0.2, "accuracy": 30.0},
        "post_time": "2027-01-01T00:00:00Z",
    }


def test_the_deadline_is_fixed_at_the_first_start_and_kept_across_tries():
    store = StateStore()
    first = sensor().wait_deadline(context(store))
    assert store.values[DEADLINE_KEY] == first
    assert sensor(timeout=3600).wait_deadline(context(store)) == first


def test_the_deadline_cap_comes_first_when_it_is_sooner():
    store = StateStore()
    store.set(DEADLINE_KEY, 2000.0)
    capped = sensor()
    capped.deadline_cap = 1500.0
    assert capped.wait_deadline(context(store)) == 1500.0
    capped.deadline_cap = 2500.0
    assert capped.wait_deadline(context(store)) == 2000.0


def test_without_a_store_a_poking_sensor_counts_from_its_first_reschedule():
    first = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)
    poking = sensor(deferrable=False, timeout=60)
    assert poking.wait_deadline(context(ti=FakeTI(first))) == first.timestamp() + 60


def test_it_follows_its_job_on_its_clusters_connection(monkeypatch):
    watched = sensor(container_name="c", backend_jobset_name="b", pending_timeout=5.0)
    monkeypatch.setattr(RewardSensor, "cluster_info", ("https://k", "ca"))
    args = watched.follow_args(123.0)
    assert (args["cluster_url"], args["ssl_ca_cert"]) == ("https://k", "ca")
    assert (args["job_name"], args["container_name"], args["backend_jobset_name"]) == (
        JOB,
        "c",
        "b",
    )
    assert (args["deadline"], args["pending_timeout"]) == (123.0, 5.0)
    assert args["tensorboard_every_s"] == watched.poll_interval
