"""worker_occupancy_ratio: seconds the reward wait holds a worker slot / the wait's wall time.

`RunRewardSensor` is driven by hand as a worker and the triggerer would: deferrable, a worker
runs `execute()` until TaskDeferred and later `execute_complete()`, while the trigger (rebuilt
from its serialized kwargs, as the triggerer does) runs in asyncio between them, holding no
slot. Baseline: the same sensor with `deferrable=False, mode="poke"`, whose `execute()` holds
the slot for the whole wait.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from airflow._shared.module_loading import import_string
from airflow.sdk.exceptions import TaskDeferred
from airflow.triggers.base import BaseTrigger

from tests.bench.metric import metric
from tests.bench.workload import new_run, scenario, train_job_name
from tests.sandbox.controller import Controller
from tests.sandbox.harness import Sandbox
from tpu_rl.layout import RunLayout
from tpu_rl.operators.rewards import RunRewardSensor

GOAL = 0.05
# 3110 simulated seconds of training (50 steps of 60 s) take about 8 s of wall time
TIME_SCALE = 0.0025


def sensor(layout: RunLayout, **kwargs: Any) -> RunRewardSensor:
    s = layout.settings
    return RunRewardSensor(
        task_id="wait_for_rewards",
        project_id=s.project,
        location=s.region,
        cluster_name=s.cluster_name,
        namespace=s.namespace,
        job_name=train_job_name(layout),
        backend_jobset_name=layout.backend_jobset,
        retries=0,
        **kwargs,
    )


async def first_event(trigger: BaseTrigger) -> dict[str, Any]:
    async for event in trigger.run():
        return event.payload
    raise RuntimeError("the trigger ended without an event")


def deferred_wait(box: Sandbox, conf: dict[str, Any]) -> dict[str, Any]:
    layout = new_run(box, conf, backend=True)
    task = sensor(layout, deferrable=True)
    context: dict[str, Any] = {"params": conf, "run_id": layout.run_id, "ti": None}
    with Controller(box.emu, scenario(box, conf), time_scale=TIME_SCALE):
        started = time.perf_counter()
        try:
            task.execute(context)
            raise RuntimeError("the deferrable sensor did not defer")
        except TaskDeferred as deferred:
            deferred_at = time.perf_counter()
            classpath, kwargs = deferred.trigger.serialize()
            payload = asyncio.run(first_event(import_string(classpath)(**kwargs)))
            resumed_at = time.perf_counter()
            result = getattr(task, deferred.method_name)(context, event=payload)
        ended = time.perf_counter()
    return {
        "held_s": (deferred_at - started) + (ended - resumed_at),
        "execute_s": deferred_at - started,
        "execute_complete_s": ended - resumed_at,
        "in_triggerer_s": resumed_at - deferred_at,
        "wall_s": ended - started,
        "post_mean_reward": result["post"]["mean_reward"],
    }


def poked_wait(box: Sandbox, conf: dict[str, Any]) -> dict[str, Any]:
    layout = new_run(box, conf, backend=True)
    task = sensor(layout, deferrable=False, mode="poke")
    context: dict[str, Any] = {"params": conf, "run_id": layout.run_id, "ti": None}
    with Controller(box.emu, scenario(box, conf), time_scale=TIME_SCALE):
        started = time.perf_counter()
        result = task.execute(context)
        ended = time.perf_counter()
    return {
        "held_s": ended - started,
        "wall_s": ended - started,
        "post_mean_reward": result["post"]["mean_reward"],
    }


def measure(box: Sandbox, conf: dict[str, Any]) -> dict[str, Any]:
    deferred, poked = deferred_wait(box, conf), poked_wait(box, conf)
    ours = deferred["held_s"] / deferred["wall_s"]
    baseline = poked["held_s"] / poked["wall_s"]
    rounded = {k: round(v, 4) for k, v in deferred.items()}
    return metric(
        ours,
        baseline,
        unit="ratio",
        goal=GOAL,
        baseline_is='the same sensor with deferrable=False, mode="poke"',
        details={
            "deferrable": rounded,
            "poke": {k: round(v, 4) for k, v in poked.items()},
            "poll_interval_s": conf["poll_interval_seconds"],
            "time_scale": TIME_SCALE,
        },
    )
