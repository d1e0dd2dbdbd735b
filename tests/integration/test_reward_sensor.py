"""RewardSensor: deferral with a fixed deadline, the XCom result, errors, reschedule mode.

Seams patched: the GKE control plane (GKEHook.get_cluster returns the emulator's endpoint
and CA, as GKE's API would) and Google credentials (get_token). The rest is HTTPS.
"""

import asyncio
import datetime as dt
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import (
    AirflowException,
    AirflowFailException,
    AirflowSensorTimeout,
    TaskDeferred,
)
from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEHook
from airflow.providers.google.common.hooks.base_google import GoogleBaseAsyncHook

try:
    from airflow.sdk.exceptions import AirflowRescheduleException
except ImportError:  # task-sdk 1.1 (Airflow 3.1) raises Airflow core's
    from airflow.exceptions import AirflowRescheduleException

from sandbox.kube_emulator import KubeEmulator, running_emulator
from tests.integration.test_reward_trigger import (
    JOB,
    NS,
    C,
    _Token,
    make_job,
    make_pod,
    post,
    pre,
    step,
)
from tpu_rl.rewards.sensor import DEADLINE_KEY, POSITION_KEY, RewardSensor
from tpu_rl.rewards.trigger import RewardTrigger


class StateStore:
    """The task state store: survives retries, reschedules and deferrals of one task."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value


class FakeTI:
    def __init__(self, first_reschedule: Any = None) -> None:
        self.first_reschedule = first_reschedule

    def get_first_reschedule_date(self, context: Any) -> Any:
        return self.first_reschedule


@pytest.fixture
def emu(monkeypatch: pytest.MonkeyPatch) -> Iterator[KubeEmulator]:
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT", '{"conn_type": "google_cloud_platform"}'
    )
    with running_emulator(token="tok-1") as emulator:
        calls: list[str] = []

        def get_cluster(self: GKEHook, name: str, project_id: str, **_: Any) -> Any:
            calls.append(f"{project_id}/{self.location}/{name}")
            return SimpleNamespace(
                endpoint=emulator.url.removeprefix("https://"),
                master_auth=SimpleNamespace(cluster_ca_certificate=emulator.ca_b64),
            )

        async def get_token(self: GoogleBaseAsyncHook, *, session: Any = None) -> _Token:
            return _Token(emulator.token)

        monkeypatch.setattr(GKEHook, "get_cluster", get_cluster)
        monkeypatch.setattr(GoogleBaseAsyncHook, "get_token", get_token)
        emulator.cluster_calls = calls  # type: ignore[attr-defined]
        yield emulator


def sensor(**kwargs: Any) -> RewardSensor:
    args: dict[str, Any] = {
        "task_id": "rewards",
        "project_id": "demo-project",
        "location": "us-east5",
        "cluster_name": "gemma4-rl",
        "job_name": JOB,
        "namespace": NS,
        "poll_interval": 0.05,
        "timeout": 60,
    }
    args.update(kwargs)
    return RewardSensor(**args)


def context(store: StateStore | None = None, ti: FakeTI | None = None) -> dict[str, Any]:
    ctx: dict[str, Any] = {"ti": ti or FakeTI()}
    if store is not None:
        ctx["task_state_store"] = store
    return ctx


def test_job_name_is_templated():
    assert "job_name" in RewardSensor.template_fields
    assert {"cluster_name", "location", "project_id"} <= set(RewardSensor.template_fields)


def test_defers_with_cluster_from_gke_and_a_deadline_fixed_at_first_start(emu):
    store = StateStore()
    with pytest.raises(TaskDeferred) as deferred:
        sensor(backend_jobset_name="gemma4-pw", pending_timeout=900).execute(context(store))
    trigger = deferred.value.trigger
    assert isinstance(trigger, RewardTrigger)
    classpath, kwargs = trigger.serialize()
    assert classpath == "tpu_rl.rewards.trigger.RewardTrigger"
    assert kwargs["cluster_url"] == emu.url and kwargs["ssl_ca_cert"] == emu.ca_b64
    assert kwargs["backend_jobset_name"] == "gemma4-pw" and kwargs["pending_timeout"] == 900
    assert abs(kwargs["deadline"] - (time.time() + 60)) < 5
    assert store.values[DEADLINE_KEY] == kwargs["deadline"]
    assert deferred.value.method_name == "execute_complete"
    assert deferred.value.timeout.total_seconds() > 60
    assert emu.cluster_calls == ["demo-project/us-east5/gemma4-rl"]

    time.sleep(0.05)  # a retry later: same deadline, not a new one
    with pytest.raises(TaskDeferred) as again:
        sensor().execute(context(store))
    assert again.value.trigger.serialize()[1]["deadline"] == kwargs["deadline"]


def test_deadline_already_passed_on_retry(emu):
    store = StateStore()
    store.set(DEADLINE_KEY, time.time() - 1)
    with pytest.raises(AirflowSensorTimeout):
        sensor().execute(context(store))


def test_deferred_run_end_to_end(emu):
    make_job(emu)
    make_pod(emu, "train-a")
    emu.append_log(NS, "train-a", C, pre() + step(10) + post())
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


def test_reschedule_mode_keeps_its_position_between_pokes(emu):
    make_job(emu)
    make_pod(emu, "train-a")
    emu.append_log(NS, "train-a", C, pre() + step(10))
    store = StateStore()
    first = sensor(deferrable=False)
    assert first.mode == "reschedule"
    with pytest.raises(AirflowRescheduleException):
        first.execute(context(store))
    position = store.values[POSITION_KEY]
    assert position["pre"]["corr"] == 7 and position["last_time"]

    emu.append_log(NS, "train-a", C, step(20) + post())
    result = sensor(deferrable=False).execute(context(store))  # a new process per poke
    assert result["post"]["corr"] == 12 and result["pre"]["corr"] == 7
    reads = [r for r in emu.requests if r.path.endswith("/log")]
    assert len(reads) == 2 and "sinceTime" in reads[1].query


def test_reschedule_mode_fails_fast(emu):
    make_job(emu)
    make_pod(emu, "train-a")
    emu.set_job_condition(NS, JOB, "Failed", reason="DeadlineExceeded")
    with pytest.raises(AirflowFailException, match="DeadlineExceeded"):
        sensor(deferrable=False).execute(context(StateStore()))


def test_reschedule_mode_rides_out_a_server_error(emu):
    make_job(emu)
    make_pod(emu, "train-a")
    emu.append_log(NS, "train-a", C, post())
    emu.inject_faults(503, 1)
    store = StateStore()
    with pytest.raises(AirflowRescheduleException):
        sensor(deferrable=False).execute(context(store))
    assert sensor(deferrable=False).execute(context(store))["post"]["corr"] == 12


def test_without_a_state_store_the_deadline_counts_from_the_first_reschedule(emu):
    make_job(emu)
    make_pod(emu, "train-a")
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=120)
    with pytest.raises(AirflowSensorTimeout, match="timeout"):
        sensor(deferrable=False).execute(context(ti=FakeTI(first_reschedule=long_ago)))
