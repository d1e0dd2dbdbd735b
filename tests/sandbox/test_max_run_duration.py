"""GKE flex-start's max run duration in the sandbox: the label and termination annotation on
the nodes the autoscaler makes, the node's end when its time is up, a fresh slice after."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from sandbox.cloud import GcsEmulator
from sandbox.cluster_model import POOL_LABEL, ClusterModel
from sandbox.controller import Controller, Scenario
from sandbox.harness import RUN_LABEL, Workloads, build_scenario
from sandbox.kube_emulator import KubeEmulator, running_emulator
from sandbox.ledger import Lifetime
from sandbox.max_run_duration import (
    DEFAULT_MAX_RUN_S,
    MAX_RUN_LABEL,
    TERMINATION_ANNOTATION,
)
from sandbox.pod_scripts import PodScript, log, run_forever
from sandbox.preemption import SHUTDOWN_MESSAGE, Preemption
from tests.support.sandbox_cluster import (
    BUCKET,
    NS,
    TPU_POOL,
    VARS,
    backend_and_client,
    full_log,
    tpu_job,
    tpu_nodes,
    wait_for,
)

SCALE = 0.001  # wall seconds per simulated second
MAX_RUN = 2000  # simulated seconds: two wall seconds
DELAY = 100  # a slice's provisioning delay, simulated
TICKS = 300  # simulated slack for controller passes (10 ms of wall each, more when loaded)
FOREVER = PodScript([log("up\n"), run_forever()])
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"


@pytest.fixture
def emu() -> Iterator[KubeEmulator]:
    with running_emulator() as emulator:
        yield emulator


def stamp(node: dict[str, Any]) -> str:
    return (node["metadata"].get("annotations") or {}).get(TERMINATION_ANNOTATION, "")


def at(value: str) -> datetime:
    return datetime.fromisoformat(value)


def running_on(emu: KubeEmulator, nodes: list[dict[str, Any]]) -> list[str]:
    names = {n["metadata"]["name"] for n in nodes}
    return [
        p["metadata"]["name"]
        for p in emu.list("pods", NS)
        if p["spec"].get("nodeName") in names and p["status"].get("phase") == "Running"
    ]


def lifetimes(emu: KubeEmulator, pool: str) -> list[Lifetime]:
    return sorted((n for n in emu.ledger.nodes if n.group == pool), key=lambda n: n.started)


def test_a_flex_start_slice_ends_at_its_max_run_duration_and_a_fresh_one_comes(
    emu: KubeEmulator,
) -> None:
    """Each node of the slice carries GKE's label (the duration) and annotation (creation +
    the duration, wall clock); when the time is up its pods end as in a graceful node shutdown
    and the Node goes; the Job's new pods get a fresh slice, which ends later."""
    ClusterModel.described({**VARS, "capacity": "flex_start"}).provision(emu)
    scenario = Scenario(provisioning_delay_s=DELAY, scale_down_idle_s=10**6, flex_max_run_s=MAX_RUN)
    with Controller(emu, scenario.on("rl-1-convert", FOREVER), time_scale=SCALE) as c:
        emu.create(tpu_job("rl-1-convert", backoffLimit=100))
        first = wait_for(lambda: len(tpu_nodes(emu)) == 8 and tpu_nodes(emu))
        for node in first:
            meta = node["metadata"]
            assert meta["labels"][MAX_RUN_LABEL] == str(MAX_RUN)
            assert re.fullmatch(STAMP, stamp(node)), stamp(node)
            # creation + the duration in wall seconds (creationTimestamp has whole seconds)
            wall_s = (at(stamp(node)) - at(meta["creationTimestamp"])).total_seconds()
            assert -0.1 < wall_s - MAX_RUN * SCALE < 1.1
            # and on the simulated clock: MAX_RUN after the node came (the ledger's start)
            came = next(r.started for r in emu.ledger.nodes if r.name == meta["name"])
            assert abs(c.clock.simulated_at(at(stamp(node))) - came - MAX_RUN) < 0.01
        victims = wait_for(lambda: len(running_on(emu, first)) == 8 and running_on(emu, first))
        assert len(tpu_nodes(emu)) == 8  # not before its time
        wait_for(lambda: not tpu_nodes(emu))
        for name in victims:
            status = emu.get("pods", NS, name)["status"]
            assert (status["phase"], status["reason"]) == ("Failed", "Terminated")
            assert status["message"] == SHUTDOWN_MESSAGE
            disruption = next(x for x in status["conditions"] if x["type"] == "DisruptionTarget")
            assert disruption["reason"] == "TerminationByKubelet"
        assert sorted(c.preemption.expired) == sorted(n["metadata"]["name"] for n in first)
        second = wait_for(lambda: len(tpu_nodes(emu)) == 8 and tpu_nodes(emu))
        assert min(at(stamp(n)) for n in second) > max(at(stamp(n)) for n in first)
        assert all(n["metadata"]["labels"][MAX_RUN_LABEL] == str(MAX_RUN) for n in second)
        wait_for(lambda: len(running_on(emu, second)) == 8)
    old, new = lifetimes(emu, TPU_POOL)[:8], lifetimes(emu, TPU_POOL)[8:]
    assert len(new) == 8 and all(n.ended is None for n in new)
    for record in old:  # the ledger bills each node until its run duration ended
        assert record.ended is not None
        assert MAX_RUN - 0.01 <= record.ended - record.started < MAX_RUN + TICKS
    # the fresh slice came after the provisioning delay its new pods waited for
    assert min(n.started for n in new) - max(n.ended or 0 for n in old) >= DELAY


@pytest.mark.parametrize("capacity", ["spot", "reservation"])
def test_only_flex_start_nodes_have_a_max_run_duration(emu: KubeEmulator, capacity: str) -> None:
    """A Spot or reservation pool's node the autoscaler repairs has neither the label nor the
    annotation and outlives the duration; a flex-start pool's, in the same cluster, has both
    and is gone once it is over."""
    model = ClusterModel.described({**VARS, "capacity": capacity})
    flex = ClusterModel.described({**VARS, "capacity": "flex_start"}).pool(TPU_POOL)
    assert flex is not None
    model.pools.append(dataclasses.replace(flex, name="flex-np"))
    model.provision(emu)
    static = sorted(n["metadata"]["name"] for n in tpu_nodes(emu))
    assert len(static) == 8
    pinned = tpu_job("rl-1-convert", backoffLimit=100)
    pinned["spec"]["template"]["spec"]["nodeSelector"] = {POOL_LABEL: "flex-np"}
    scenario = Scenario(provisioning_delay_s=DELAY, scale_down_idle_s=10**6, flex_max_run_s=MAX_RUN)
    with Controller(emu, scenario.on("rl-1-convert", FOREVER), time_scale=SCALE) as c:
        emu.delete("nodes", "", static[0])  # the pool's instance group recreates it
        emu.create(pinned)

        def pool(name: str) -> list[dict[str, Any]]:
            return [n for n in tpu_nodes(emu) if n["metadata"]["labels"][POOL_LABEL] == name]

        flex_nodes = wait_for(lambda: len(pool("flex-np")) == 8 and pool("flex-np"))
        wait_for(lambda: len(pool(TPU_POOL)) == 8)
        assert all(n["metadata"]["labels"][MAX_RUN_LABEL] == str(MAX_RUN) for n in flex_nodes)
        assert all(stamp(n) for n in flex_nodes)
        for node in pool(TPU_POOL):
            assert MAX_RUN_LABEL not in node["metadata"]["labels"]
            assert TERMINATION_ANNOTATION not in (node["metadata"].get("annotations") or {})
        wait_for(lambda: not pool("flex-np"))
        assert c.clock() > MAX_RUN + DELAY  # the repaired node came by DELAY
        assert sorted(n["metadata"]["name"] for n in pool(TPU_POOL)) == static
    repaired = lifetimes(emu, TPU_POOL)[-1]
    assert repaired.name == static[0] and repaired.ended is None and repaired.started >= DELAY


def test_the_runs_client_loses_its_backend_when_the_slice_ends(
    emu: KubeEmulator,
) -> None:
    """Through the harness: Workloads' `flex_max_run_s` reaches the autoscaler, and the run's
    Preemption (given to the controller) ends the slice, so the GRPO client dies with gRPC
    UNAVAILABLE as after a Spot preemption; the slice's end is no Spot preemption."""
    gcs = GcsEmulator()
    gcs.client().create_bucket(BUCKET)
    try:
        ClusterModel.described({**VARS, "capacity": "flex_start"}).provision(emu)
        w = Workloads(scale_down_idle_s=10**6, flex_max_run_s=MAX_RUN)
        assert Workloads().flex_max_run_s == DEFAULT_MAX_RUN_S == 604800
        preemption = Preemption(emu, lambda: emu.ledger.clock(), RUN_LABEL)
        scenario = build_scenario({"gcs_bucket": BUCKET}, gcs, w, emu, preemption)
        assert scenario.flex_max_run_s == MAX_RUN
        jobset, client = backend_and_client(num_batches=60)
        with Controller(emu, scenario, time_scale=SCALE, preemption=preemption):
            emu.create(jobset)
            wait_for(lambda: len(tpu_nodes(emu)) == 8)
            emu.create(client)
            wait_for(lambda: emu.get("jobs", NS, "rl-1-train")["status"].get("failed"))
            train = emu.list("pods", NS, "job-name=rl-1-train")[0]["metadata"]["name"]
            assert "UNAVAILABLE: Pathways worker disconnected" in full_log(emu, train)
    finally:
        gcs.stop()
    (attempt,) = emu.ledger.attempts
    assert attempt.outcome == "capacity_lost" and 0 < len(attempt.steps) < 60
    assert len(preemption.expired) == 8 and not preemption.preempted
    came = min(r.started for r in lifetimes(emu, TPU_POOL))
    assert preemption.lost["rl-1"] - came >= MAX_RUN - 0.01
