"""A training Job (and its Pathways backend) as the DAG creates them, and the trigger on it."""

from __future__ import annotations

import time
import uuid
from typing import Any

from sandbox.controller import Scenario
from sandbox.harness import Sandbox, Workloads, build_scenario
from sandbox.kube_emulator import KubeEmulator
from tools.bench.redefer import until_end
from tpu_rl.backend import jobset as pathways_jobset
from tpu_rl.jobs import manifests
from tpu_rl.layout import RunLayout
from tpu_rl.settings.run_settings import load_settings


def new_run(box: Sandbox, conf: dict[str, Any], *, backend: bool) -> RunLayout:
    """Create a fresh run's training Job (and backend JobSet) from the product's manifests."""
    layout = RunLayout(load_settings(dict(conf)), f"bench__{uuid.uuid4().hex}", "bench")
    if backend:
        box.emu.create(pathways_jobset.backend_jobset(layout))
    box.emu.create(manifests.train_job(layout))
    return layout


def train_job_name(layout: RunLayout) -> str:
    return manifests.train_job(layout)["metadata"]["name"]


def scenario(box: Sandbox, conf: dict[str, Any]) -> Scenario:
    """The tutorial's happy path: MaxText's GRPO client, Pathways servers that run until deleted."""
    return build_scenario(conf, box.gcs, Workloads())


def reward_trigger(emu: KubeEmulator, layout: RunLayout, poll_s: float) -> Any:
    """The product's reward trigger on the run's training Job, as the sensor defers on it."""
    from tpu_rl.rewards.trigger import RewardTrigger

    return RewardTrigger(
        cluster_url=emu.url,
        ssl_ca_cert=emu.ca_b64,
        namespace=layout.settings.namespace,
        job_name=train_job_name(layout),
        deadline=time.time() + 600,
        poll_interval=poll_s,
        pending_timeout=600,
    )


async def wait_end(
    emu: KubeEmulator, layout: RunLayout, poll_s: float, deferred: list[Any] | None = None
) -> dict[str, Any]:
    """The reward wait's end on the run's Job, past its progress reports (tools.bench.redefer;
    `deferred` gets each trigger it deferred on)."""
    return await until_end(reward_trigger(emu, layout, poll_s), deferred)
