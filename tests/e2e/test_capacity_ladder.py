"""Whole DAG runs on a capacity ladder: a rung GKE refuses for lack of capacity, or
whose slice does not come within its wait (`rung_wait_seconds`), is released and the next one
tried; every rung refused fails the run with each rung's reason.

Without the ladder, the Spot stockout fails `create_cluster` and the flex-start one fails the
run at the pending timeout: neither moves to a second rung. With a ladder but no rung wait and
no conversion or resume move, the conversion-first run fails `convert` (its Job's deadline
passes on the stocked-out rung) and the run whose rung gives no slice back after a preemption
fails `wait_for_rewards` at the pending timeout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from sandbox.harness import SETTINGS, SPOT, RunResult, Sandbox, Workloads, write_converted
from tests.support.e2e_runs import attempts, no_tpu_left, reported_run

ZONE_B, ZONE_A = "us-east5-b", "us-east5-a"
# the first rung is the run's capacity and zone (validate asks for it): Spot in us-east5-b
LADDER = {
    **SPOT,
    "num_batches": 50,
    "checkpoint_period": 25,
    "capacity_ladder": f"spot@{ZONE_B}, flex_start@{ZONE_A}",
}
STOCKOUT = "GCE_STOCKOUT"
IGM_WAIT = (
    "Error waiting for creating GKE NodePool: Google Compute Engine: Not all instances running "
    "in IGM after 35m0s"
)
TPU_POOL = "module.gke-tpu-v6e-pool.google_container_node_pool.node_pool[0]"


def replaced_nodes(result: RunResult, pool: str) -> list[str]:
    """Nodes of `pool` that went and came back under the same name before cleanup (GKE moved
    the pool: its locations changed)."""
    names = [n.name for n in result.ledger.nodes if n.group == pool]
    return sorted({n for n in names if names.count(n) > 1})


@dataclass
class Case:
    name: str
    expected: str
    workloads: Workloads = field(default_factory=Workloads)


def tries(result: RunResult) -> list[dict[str, Any]]:
    """The ladder's one record of the rungs tried, whichever step moved the run
    (tpu_rl.cluster.rung_record): create_cluster's XCom, and no other step's."""
    assert not [k for k in result.xcoms if k.endswith(".rungs") and k != "create_cluster.rungs"]
    return result.xcoms.get("create_cluster.rungs") or []


def deploy_zones(result: RunResult) -> list[str]:
    """The zone of each `gcluster deploy`, in order (its --vars)."""
    zones = []
    for call in result.calls:
        argv = call["argv"]
        if call["tool"] == "gcluster" and argv[0] == "deploy":
            given = dict(v.split("=", 1) for v in argv[argv.index("--vars") + 1].split(","))
            zones.append(given["zone"])
    return zones


def tpu_nodes(result: RunResult) -> list[Any]:
    return [n for n in result.ledger.nodes if n.tpu]


def test_a_stockout_on_the_first_rung_moves_to_the_second(airflow_db, tmp_path, capfd, e2e_report):
    """No Spot VMs in us-east5-b: the static Spot pool waits GKE's 35 minutes (simulated) for
    its VMs, its terraform create timeout (45m) outlasting it, and fails with GKE's GCE_STOCKOUT;
    the run moves to flex-start in us-east5-a (its TPU pods select flex-start nodes), trains and
    finishes. The move makes a new TPU pool there while the cluster's zone, its system pool and
    cpu-np stay in us-east5-b (with terraform's 30-minute default the create would time out
    first, with no stockout word, and the run fail; moving the cluster's node_locations would
    move every pool)."""
    case = Case("ladder_first_rung_stocked_out", "success")
    with Sandbox(tmp_path).up() as box:
        box.capacity.stock_out("spot", ZONE_B)
        result, log = reported_run(box, case, LADDER, capfd, e2e_report)
        report = result.gcs.read(f"{result.xcoms['verify.return_value']}run-report.md").decode()
    assert [(t["rung"], t["outcome"]) for t in tries(result)] == [
        (f"spot@{ZONE_B}", "stockout"),
        (f"flex_start@{ZONE_A}", "ready"),
    ], tries(result)
    reason = tries(result)[0]["reason"]
    assert IGM_WAIT in reason and STOCKOUT in reason and f"zones/{ZONE_B}" in reason, reason
    assert f"Capacity ladder: rung 1 spot@{ZONE_B} could not give the whole slice" in log
    assert f"# {TPU_POOL} will be replaced" in log  # its own name: a new pool
    assert "google_container_cluster.gke_cluster will be updated" not in log
    assert "cpu_np[0] will be" not in log and "system_node_pools[0] will be" not in log
    assert replaced_nodes(result, "cpu-np") == replaced_nodes(result, "system") == []
    flex = {n.group for n in tpu_nodes(result)}
    assert flex == {"gke-tpu-v6e-pool-rung2"}, flex
    assert f"moves to rung 2 flex_start@{ZONE_A}" in log
    assert tries(result)[-1]["rung"] == f"flex_start@{ZONE_A}"  # the rung the run stood on
    # the slice came from the second rung: flex-start nodes scaled up in us-east5-a
    assert "TriggeredScaleUp" in {e["reason"] for e in result.emu.list("events")}
    assert deploy_zones(result) == [ZONE_B, ZONE_A], deploy_zones(result)
    assert tpu_nodes(result), "no TPU node came up"
    assert [a["outcome"] for a in attempts(result)] == ["completed"]
    assert "## Capacity ladder" in report and STOCKOUT in report, report
    no_tpu_left(result)
    assert result.clusters == {}


def test_a_reservation_used_by_others_moves_to_the_next_rung(
    airflow_db, tmp_path, capfd, e2e_report
):
    """Other VMs hold the run's specific reservation: Compute Engine refuses the reservation
    pool (CONDITION_NOT_MET, "does not have available resources for the request"), the run
    moves to flex-start in us-east5-a and finishes there."""
    case = Case("ladder_reservation_used_by_others", "success")
    conf = {**SETTINGS, "num_batches": 50, "checkpoint_period": 25,
            "capacity_ladder": f"reservation@{ZONE_B}, flex_start@{ZONE_A}"}  # fmt: skip
    with Sandbox(tmp_path).up() as box:
        box.capacity.reservation_in_use(ZONE_B)
        result, log = reported_run(box, case, conf, capfd, e2e_report)
    assert f"rung 1 reservation@{ZONE_B} could not give the whole slice" in log
    assert [(t["rung"], t["outcome"]) for t in tries(result)] == [
        (f"reservation@{ZONE_B}", "stockout"),
        (f"flex_start@{ZONE_A}", "ready"),
    ], tries(result)
    reason = tries(result)[0]["reason"]
    assert "[CONDITION_NOT_MET]: Instance creation failed: Specified reservation " in reason
    assert "'v6e-32-reservation' does not have available resources" in reason
    assert deploy_zones(result) == [ZONE_B, ZONE_A], deploy_zones(result)
    assert [a["outcome"] for a in attempts(result)] == ["completed"]
    no_tpu_left(result)
    assert result.clusters == {}


def test_every_rung_stocked_out_fails_with_each_reason(airflow_db, tmp_path, capfd, e2e_report):
    """Spot stocked out in both zones: each rung's deploy is refused, create_cluster fails naming
    both reasons, and cleanup leaves no cluster, node pool or TPU node billing."""
    case = Case("ladder_every_rung_stocked_out", "failed")
    conf = {**LADDER, "capacity_ladder": f"spot@{ZONE_B}, spot@{ZONE_A}"}
    with Sandbox(tmp_path).up() as box:
        box.capacity.stock_out("spot", ZONE_B)
        box.capacity.stock_out("spot", ZONE_A)
        result, log = reported_run(box, case, conf, capfd, e2e_report)
    assert result.task_states["create_cluster"] == "failed", result.task_states
    assert result.task_states["cleanup_cluster"] == "success", result.task_states
    assert "Capacity ladder: none of its 2 rungs could give the whole slice" in log
    for zone in (ZONE_B, ZONE_A):
        assert f"spot@{zone}: Error: {IGM_WAIT}" in log
        assert f"zones/{zone}' does not have enough resources available" in log
    assert [t["outcome"] for t in tries(result)] == ["stockout", "stockout"], tries(result)
    assert deploy_zones(result)[:2] == [ZONE_B, ZONE_A], deploy_zones(result)
    assert not tpu_nodes(result) and result.clusters == {}, result.clusters
    assert result.leftovers == [], result.leftovers


FLEX_LADDER = {
    **LADDER,
    "capacity": "flex_start",
    "capacity_ladder": f"flex_start@{ZONE_B}, flex_start@{ZONE_A}",
    "pending_timeout_minutes": 1,
    "rung_wait_seconds": 10,
    "conversion_timeout_minutes": 600,  # the Job's deadline (36 wall s) far past the wait
}


@pytest.mark.parametrize(
    ("first", "name"),
    [("start_backend", "ladder_flex_start_rung_never_scales"), ("convert", "ladder_conversion")],
)
def test_a_flex_start_rung_without_a_slice_in_time_moves_on(
    first, name, airflow_db, tmp_path, capfd, e2e_report
):
    """Flex-start in us-east5-b deploys (its pool has no node) but GKE cannot scale it up
    (FailedScaleUp, GCE out of resources). The first workload to ask for the slice (the
    conversion Job; the backend when the conversion is already in the bucket) waits
    rung_wait_seconds, is deleted, the next rung's pool is deployed in us-east5-a and the step
    runs again there; the rest of the run follows on that rung."""
    case = Case(name, "success")
    with Sandbox(tmp_path).up() as box:
        if first == "start_backend":
            write_converted(box.gcs, FLEX_LADDER)
        box.capacity.stock_out("flex_start", ZONE_B)
        result, log = reported_run(box, case, FLEX_LADDER, capfd, e2e_report)
    assert [(t["rung"], t["outcome"]) for t in tries(result)] == [
        (f"flex_start@{ZONE_B}", "no_slice"),
        (f"flex_start@{ZONE_A}", "ready"),
    ], tries(result)
    reason = tries(result)[0]["reason"]
    assert reason.startswith(f"Node scale up in zones {ZONE_B} associated with this pod failed")
    assert "GCE out of resources" in reason, reason
    assert f"rung 1 flex_start@{ZONE_B} could not give the whole slice" in log
    # a new pool in us-east5-a, not the old one moved there in place
    assert f"# {TPU_POOL} will be replaced" in log and "updated in-place" not in log
    assert deploy_zones(result) == [ZONE_B, ZONE_A], deploy_zones(result)
    assert [a["outcome"] for a in attempts(result)] == ["completed"]
    no_tpu_left(result)
    assert result.clusters == {}


def test_a_rung_that_gives_no_slice_back_after_a_preemption_moves_on(
    airflow_db, tmp_path, capfd, e2e_report
):
    """Spot in us-east5-b is preempted at step 30 and stays stocked out from the time training
    started: its pool's lost node is not recreated, so the resumed backend stays pending. After
    rung_wait_seconds the wait leaves the rung, deploys flex-start in us-east5-a and resumes
    there from the save of step 25; the run finishes and nothing is left billing."""
    conf = {**LADDER, "pending_timeout_minutes": 1, "rung_wait_seconds": 5}
    with Sandbox(tmp_path).up() as box:
        stocked: list[float] = []

        def stock_out_spot() -> None:  # once: the hook runs in each attempt's training pod
            if not stocked:
                stocked.append(box.capacity.clock())
                box.capacity.stock_out("spot", ZONE_B, stocked[0])

        w = Workloads(preempt_at_steps=(30,), during_training=stock_out_spot)
        case = Case("ladder_rung_lost_then_stocked_out", "success", w)
        result, log = reported_run(box, case, conf, capfd, e2e_report)
    assert [(t["rung"], t["outcome"]) for t in tries(result)] == [
        (f"spot@{ZONE_B}", "no_slice"),
        (f"flex_start@{ZONE_A}", "ready"),
    ], tries(result)
    assert f"rung 1 spot@{ZONE_B} could not give the whole slice" in log
    assert f"Resuming on the capacity ladder's next rung flex_start@{ZONE_A}." in log
    record = attempts(result)
    assert [(a["outcome"], a.get("rung")) for a in record] == [
        ("capacity_lost", f"spot@{ZONE_B}"),
        ("completed", f"flex_start@{ZONE_A}"),
    ], record
    assert record[1]["resumed_from_step"] == 25, record
    assert deploy_zones(result) == [ZONE_B, ZONE_A], deploy_zones(result)
    no_tpu_left(result)
    assert result.clusters == {}
