"""A training Job (and its Pathways backend) as the DAG creates them, in a running sandbox."""

from __future__ import annotations

import uuid
from typing import Any

from tests.sandbox.controller import Scenario
from tests.sandbox.harness import Sandbox, Workloads, build_scenario
from tpu_rl import manifests
from tpu_rl.layout import RunLayout
from tpu_rl.settings import load_settings


def new_run(box: Sandbox, conf: dict[str, Any], *, backend: bool) -> RunLayout:
    """Create a fresh run's training Job (and backend JobSet) from the product's manifests."""
    layout = RunLayout(load_settings(dict(conf)), f"bench__{uuid.uuid4().hex}")
    if backend:
        box.emu.create(manifests.backend_jobset(layout))
    box.emu.create(manifests.train_job(layout))
    return layout


def train_job_name(layout: RunLayout) -> str:
    return manifests.train_job(layout)["metadata"]["name"]


def scenario(box: Sandbox, conf: dict[str, Any]) -> Scenario:
    """The tutorial's happy path: MaxText's GRPO client, Pathways servers that run until deleted."""
    return build_scenario(conf, box.gcs, Workloads())
