"""Capacity modes in the sandbox: pools by mode, scale from zero, preemption, MaxText resume."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sandbox.cloud import (
    GcsEmulator,
    GkeControlPlane,
    add_running_cluster,
)
from sandbox.cluster_model import ClusterModel
from sandbox.controller import Controller, Scenario
from sandbox.harness import RUN_LABEL, Workloads, build_scenario
from sandbox.kube_emulator import KubeEmulator, running_emulator
from sandbox.orbax_saves import checkpoint_uris
from sandbox.paths import BLUEPRINT_FIXTURES
from sandbox.preemption import IMPENDING_TAINT, SHUTDOWN_MESSAGE, Preemption
from sandbox.workloads import DEFAULT_PRE
from tests.support.sandbox_cluster import (
    BUCKET,
    NS,
    TPU_POOL,
    TRAINED,
    VARS,
    backend_and_client,
    deploy_tutorial_blueprint,
    full_log,
    tpu_job,
    tpu_nodes,
    wait_for,
)

EXAMPLES = BLUEPRINT_FIXTURES / "consumption-options"
SCALE = 0.0005  # wall seconds per simulated second


@pytest.fixture
def emu() -> Iterator[KubeEmulator]:
    with running_emulator() as emulator:
        yield emulator


@pytest.fixture
def gcs() -> Iterator[GcsEmulator]:
    emulator = GcsEmulator()
    emulator.client().create_bucket(BUCKET)
    yield emulator
    emulator.stop()


def reasons(emu: KubeEmulator, pod: str) -> list[str]:
    return [e["reason"] for e in emu.list("events", NS) if e["involvedObject"]["name"] == pod]


def test_pools_follow_the_blueprint_capacity() -> None:
    """Cluster Toolkit's flex-start example deploys an empty 0..8 pool with GKE's label; the
    tutorial's pool is static; an existing cluster is described with a `capacity` var."""
    flex = yaml.safe_load((EXAMPLES / "dws-flex-start__gke-tpu-v6e__gke-tpu-v6e.yaml").read_text())
    flex["vars"].update(VARS, autoscaling_min_node_count=0, autoscaling_max_node_count=8)
    flex["vars"]["kueue_configuration_path"] = "../.ghpc/staged/kueue-configuration.yaml.tftpl"
    template = EXAMPLES / "dws-flex-start__gke-tpu-v6e__kueue-configuration.yaml.tftpl"
    staged = {"kueue-configuration.yaml.tftpl": template.read_text()}
    pool = ClusterModel.from_blueprint(flex, staged).pool("gke-tpu-v6-pool")
    assert pool is not None
    assert (pool.capacity, pool.nodes, pool.max_nodes, pool.slice_hosts) == ("flex_start", 0, 8, 8)
    assert pool.labels["cloud.google.com/gke-flex-start"] == "true" and pool.scales_from_zero

    tutorial = ClusterModel.described(VARS).pool(TPU_POOL)
    assert tutorial is not None and (tutorial.capacity, tutorial.nodes) == ("reservation", 8)
    assert not tutorial.scales_from_zero and "cloud.google.com/gke-spot" not in tutorial.labels
    spot = ClusterModel.described({**VARS, "capacity": "spot"}).pool(TPU_POOL)
    # gcluster's expandHardwareSettings gives a Spot TPU pool static_node_count
    assert spot is not None and (spot.capacity, spot.nodes, spot.max_nodes) == ("spot", 8, 0)
    assert not spot.scales_from_zero
    assert spot.labels["cloud.google.com/gke-spot"] == "true"


def test_flex_start_slice_appears_whole_after_the_delay_and_goes_when_idle(
    emu: KubeEmulator,
) -> None:
    ClusterModel.described({**VARS, "capacity": "flex_start"}).provision(emu)
    assert not tpu_nodes(emu)  # no TPU node until a pod needs one
    scenario = Scenario(provisioning_delay_s=1200, scale_down_idle_s=600)
    with Controller(emu, scenario, time_scale=SCALE) as c:
        emu.create(tpu_job("rl-1-convert"))
        pod = wait_for(lambda: emu.list("pods", NS))[0]["metadata"]["name"]
        # the scheduler's and the autoscaler's events may land in different controller ticks
        wait_for(lambda: {"TriggeredScaleUp", "FailedScheduling"} <= set(reasons(emu, pod)))
        assert not tpu_nodes(emu)
        nodes = wait_for(lambda: len(tpu_nodes(emu)) == 8 and tpu_nodes(emu))
        assert all(
            n["metadata"]["labels"]["cloud.google.com/gke-flex-start"] == "true" for n in nodes
        )
        wait_for(lambda: emu.get("jobs", NS, "rl-1-convert")["status"].get("succeeded") == 8)
        wait_for(lambda: not tpu_nodes(emu))  # scaled down, all together
        now = c.clock()
    records = [n for n in emu.ledger.nodes if n.tpu]
    assert len(records) == 8 and all(r.ended is not None for r in records)
    assert min(r.started for r in records) >= 1200  # created after the provisioning delay
    # the whole slice at once: all 8 within one controller tick (10 ms = 20 simulated s)
    assert max(r.started for r in records) - min(r.started for r in records) < 20
    assert all(r.ended - r.started >= 600 for r in records)  # kept for the idle time
    nodes_s, pods_s = emu.ledger.tpu_chip_seconds(now)
    assert pods_s > 0 and nodes_s > pods_s  # idle before scale-down is not used


def test_preemption_fails_the_jobset_and_the_client(emu: KubeEmulator, gcs: GcsEmulator) -> None:
    """Spot: notice taint, the pod Terminated with DisruptionTarget, the Node deleted; the
    slice's other workers crash-loop until the Job's backoff limit fails the JobSet; the
    client dies with gRPC UNAVAILABLE; the slice comes back when pods need it again."""
    ClusterModel.described({**VARS, "capacity": "spot"}).provision(emu)
    w = Workloads(preempt_at_steps=(3,), provisioning_delay_s=3000, scale_down_idle_s=10**6)
    preemption = Preemption(emu, lambda: emu.ledger.clock(), RUN_LABEL)
    scenario = build_scenario({"gcs_bucket": BUCKET}, gcs, w, emu, preemption)
    jobset, client = backend_and_client()
    with Controller(emu, scenario, time_scale=SCALE, reconcilers=(preemption.reconcile,)):
        emu.create(jobset)
        wait_for(lambda: len(tpu_nodes(emu)) == 8)
        emu.create(client)
        node = wait_for(lambda: preemption.preempted)[0]
        taints = wait_for(lambda: (emu.get("nodes", "", node) or {}).get("spec", {}).get("taints"))
        assert IMPENDING_TAINT["key"] in [t["key"] for t in taints]
        wait_for(lambda: emu.get("nodes", "", node) is None)
        victim = next(
            p for p in emu.list("pods", NS, "jobset.sigs.k8s.io/jobset-name=rl-1-backend")
            if p["spec"].get("nodeName") == node
        )  # fmt: skip
        assert (victim["status"]["phase"], victim["status"]["reason"]) == ("Failed", "Terminated")
        assert victim["status"]["message"] == SHUTDOWN_MESSAGE
        disruption = next(
            c for c in victim["status"]["conditions"] if c["type"] == "DisruptionTarget"
        )
        assert (disruption["status"], disruption["reason"]) == ("True", "TerminationByKubelet")
        train = wait_for(lambda: emu.list("pods", NS, "job-name=rl-1-train"))[0]["metadata"]
        wait_for(lambda: emu.get("pods", NS, train["name"])["status"]["phase"] == "Failed")
        log = full_log(emu, train["name"])
        # step 3 was computed, its line (an update late, Tunix's) was still to come
        assert "UNAVAILABLE: Pathways worker disconnected" in log and "Train step 2 " in log
        assert "Train step 3 " not in log
        state = emu.get("pods", NS, train["name"])["status"]["containerStatuses"][0]["state"]
        assert state["terminated"]["exitCode"] == 1
        backend = lambda: emu.get("jobsets", NS, "rl-1-backend")["status"]  # noqa: E731
        failed = wait_for(
            lambda: [c for c in backend().get("conditions", []) if c["type"] == "Failed"]
        )
        assert failed[0]["reason"] == "ReachedMaxRestarts"
        assert len(tpu_nodes(emu)) == 7  # the lost host comes back only after the delay
        wait_for(lambda: len(tpu_nodes(emu)) == 8)  # its replacement pod asked for it
    attempt = emu.ledger.attempts[0]
    assert (attempt.steps, attempt.outcome) == ([1, 2, 3], "capacity_lost")
    back = max(emu.ledger.nodes, key=lambda n: n.started)
    assert back.tpu and back.started - preemption.lost["rl-1"] >= 3000


def test_resumed_client_starts_at_the_newest_complete_checkpoint(
    emu: KubeEmulator, gcs: GcsEmulator
) -> None:
    """Step 20 is complete, step 30's save was cut off: the new attempt restores 20, reports
    the restored model in its Pre line and trains 21..30 again; the ledger says so."""
    for step, complete in ((10, True), (20, True), (30, False)):
        uris = checkpoint_uris(TRAINED, "rl-1", step)
        for uri in uris if complete else uris[:-1]:
            gcs.write(uri, b"\0")
    _, client = backend_and_client(num_batches=40)
    scenario = build_scenario({"gcs_bucket": BUCKET}, gcs, Workloads(), emu)
    with Controller(emu, scenario, time_scale=SCALE):
        emu.create(client)
        wait_for(lambda: emu.get("jobs", NS, "rl-1-train")["status"].get("succeeded"))
    pod = emu.list("pods", NS, "job-name=rl-1-train")[0]["metadata"]["name"]
    log = full_log(emu, pod)
    assert "Restored params from step: 20 in " in log
    pre = next(line for line in log.splitlines() if "Pre RL Training:" in line)
    assert f"mean_reward={DEFAULT_PRE.mean_reward:.4f}" not in pre
    assert "Train step 20 " not in log and "Train step 21 training loss: " in log
    assert log.index("Restored params") < log.index("Pre RL Training") < log.index("step 21 ")
    names = gcs.names(BUCKET, "gemma4-26b/trained/rl-1/checkpoints/actor/30/")
    assert any(n.endswith("/_CHECKPOINT_METADATA") for n in names)  # saved again, complete
    attempt = emu.ledger.attempts[0]
    assert (attempt.restored_step, attempt.steps, attempt.outcome) == (
        20,
        list(range(21, 41)),
        "completed",
    )


@pytest.mark.parametrize(
    ("edits", "refusal"),
    [
        ({"enable_flex_start": True}, "flex-start node pools cannot consume a specific"),
        ({"spot": True}, "Spot VMs cannot consume a specific reservation"),
        ({"enable_flex_start": True, "spot": True, "reservation_affinity": None}, "Spot VMs"),
        (
            {"enable_flex_start": True, "enable_queued_provisioning": True,
             "reservation_affinity": None},
            "queued provisioning is not supported for TPU",
        ),
        ({"spot": True, "reservation_affinity": None}, None),
    ],
)  # fmt: skip
def test_gcluster_deploy_refuses_what_gke_refuses(
    tmp_path: Path, edits: dict[str, Any], refusal: str | None
) -> None:
    """A TPU pool whose capacity settings GKE refuses leaves a PARTIAL cluster and an error."""
    done, status = deploy_tutorial_blueprint(tmp_path, edits)
    if refusal is None:
        assert (done.returncode, status) == (0, "RUNNING"), done.stderr
    else:
        assert (done.returncode, status) == (1, "PARTIAL") and refusal in done.stderr


def test_backend_and_client_resubmitted_after_preemption_resume(
    emu: KubeEmulator, gcs: GcsEmulator
) -> None:
    """What the product's resume does, by hand: delete the failed backend and client, submit
    them again under the same run name; the new workers wait for the repaired slice (they do
    not crash-loop), the client restores step 20 and finishes; 21..25 were computed twice."""
    ClusterModel.described({**VARS, "capacity": "spot"}).provision(emu)
    w = Workloads(preempt_at_steps=(25,), provisioning_delay_s=600, scale_down_idle_s=10**6)
    preemption = Preemption(emu, lambda: emu.ledger.clock(), RUN_LABEL)
    scenario = build_scenario({"gcs_bucket": BUCKET}, gcs, w, emu, preemption)
    jobset, client = backend_and_client(num_batches=40)
    with Controller(emu, scenario, time_scale=SCALE, reconcilers=(preemption.reconcile,)):
        emu.create(jobset)
        emu.create(client)
        wait_for(lambda: emu.get("jobs", NS, "rl-1-train")["status"].get("failed"))
        for plural, name in (("jobsets", "rl-1-backend"), ("jobs", "rl-1-train")):
            emu.delete(plural, NS, name, propagation_policy="Foreground")
            wait_for(lambda p=plural, n=name: emu.get(p, NS, n) is None)
        emu.create(jobset)
        emu.create(client)
        wait_for(lambda: emu.get("jobs", NS, "rl-1-train")["status"].get("succeeded"))
        workers = emu.list("pods", NS, "jobset.sigs.k8s.io/jobset-name=rl-1-backend")
        assert all(
            s["restartCount"] == 0 for p in workers for s in p["status"]["containerStatuses"]
        )
    first, second = emu.ledger.attempts
    assert (first.steps[-1], first.outcome) == (25, "capacity_lost")
    assert (second.restored_step, second.steps[0], second.outcome) == (20, 21, "completed")
    assert emu.ledger.steps_recomputed() == 5


@pytest.mark.parametrize("capacity", ["flex_start", "spot"])
def test_an_existing_clusters_pools_tell_their_capacity(
    emu: KubeEmulator, tmp_path: Path, capacity: str
) -> None:
    """What the GKE API lists for a flex-start or Spot cluster: no reservation; autoscaling
    from zero for flex-start only (a Spot pool is static, as gcluster renders it)."""
    state = tmp_path / "cloud.json"
    add_running_cluster(state, "c1", "p", {**VARS, "capacity": capacity, "reservation": "r1"})
    (pool,) = (
        GkeControlPlane(emu, state).list_clusters("projects/p/locations/-").clusters[0].node_pools
    )
    assert (pool.config.spot, pool.config.flex_start) == (
        capacity == "spot",
        capacity == "flex_start",
    )
    assert not pool.config.reservation_affinity.values
    assert pool.autoscaling.enabled == (capacity == "flex_start")
