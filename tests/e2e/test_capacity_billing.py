"""Capacity as GKE really gives it: deadlines that start when the work starts, Spot
as the static pool gcluster renders, TPU-hours and cost as billed.

Each test's docstring says how a run fails without what it checks. Spot's static pool, billed
from its creation at Spot's price, is checked on test_one_cost.py's Spot run (the same settings).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

from sandbox.harness import FLEX, SPOT, RunResult, Sandbox, Workloads
from tests.support.e2e_runs import attempts, no_tpu_left, reported_run

SLICE_ARRIVES_S = 200 * 60.0  # simulated: the flex-start slice comes 200 minutes after the ask
TIME_SCALE = 0.001  # wall seconds per simulated second (Sandbox.run's default)
UPPER_BOUND = "upper bound"  # tpu_rl.prices: the on-demand price bounds it


@dataclass
class Case:
    name: str
    expected: str
    workloads: Workloads = field(default_factory=Workloads)


def counted_node_wall_seconds(result: RunResult) -> float:
    """The most the report's rule can count for the TPU nodes the sandbox made, in wall seconds:
    each node from its creationTimestamp (whole seconds) to the first of the run's looks after
    its end (the rule's end of a node, tpu_rl.report.tpu_nodes.node_seconds), or to now; so a
    loaded machine's slower steps widen it exactly as much as they widen the report's count."""
    looks = sorted(
        (
            (look["at"], look["nodes"])
            for key, value in result.xcoms.items()
            if key.endswith(".tpu_nodes")
            for look in value or []
        ),
        key=lambda look: look[0],
    )
    now = time.time()
    elapsed = result.ledger.clock()

    def epoch_of(simulated: float) -> float:
        return now - (elapsed - simulated) * TIME_SCALE

    total = 0.0
    for node in (n for n in result.ledger.nodes if n.tpu):
        end = now if node.ended is None else epoch_of(node.ended)
        created = math.floor(epoch_of(node.started) + 0.05)  # whole seconds; 50 ms for clocks
        # its creationTimestamp as a look saw it, when one did: the simulated clock maps to wall
        # time only roughly on a loaded machine (a second off, once, for each of 8 nodes)
        created = next(
            (seen[node.name] for _, seen in looks if abs(seen.get(node.name, -9) - created) <= 2),
            created,
        )
        # the first look after its end that no longer lists it (one between the sandbox's
        # record of the end and the Node's deletion still does; a later slice's node of the
        # same name was created seconds later)
        counted_end = next(
            (at for at, seen in looks if at >= end and abs(seen.get(node.name, -9) - created) > 1),
            now,
        )
        total += counted_end - created
    return total


def test_flex_start_slice_after_200_minutes_converts_within_a_180_minute_limit(
    airflow_db, tmp_path, capfd, e2e_report
):
    """The conversion Job waits 200 simulated minutes for its slice (pending_timeout 240, as in
    include/examples/flex-start.json) and then converts within its 180-minute limit; the report
    bills the slice's nodes from their creation, the wait not included, at flex-start's price.

    With activeDeadlineSeconds the 180 minutes alone, counted from Kueue's admission, the Job
    would fail DeadlineExceeded while its pods were still Pending, and so would the retry's (the
    slice scaled down again by then): `convert` would fail and the run with it. A report whose
    rule is the TPU steps' task times fails the report's checks."""
    case = Case("flex_start_slice_after_200_minutes", "success",
                Workloads(provisioning_delay_s=SLICE_ARRIVES_S))  # fmt: skip
    conf: dict[str, Any] = {
        **FLEX,
        "num_batches": 50,
        "checkpoint_period": 25,  # resume needs a checkpoint before the last step
        "pending_timeout_minutes": 240,
        "conversion_timeout_minutes": 180,
    }
    with Sandbox(tmp_path).up() as box:
        result, log = reported_run(box, case, conf, capfd, e2e_report)
        tpu = reported_tpu(result)
    assert result.task_states["convert"] == "success", result.task_states
    # the slice was asked for and waited for: its pods' wait was in the triggerer (no worker
    # slot), with the scheduler's reason; then one attempt on it completed, and nothing of it
    # bills any more
    assert "TriggeredScaleUp" in {e["reason"] for e in result.emu.list("events")}
    assert "Waiting in the triggerer for Job" in log and "Unschedulable" in log
    assert [(a["outcome"], a["tpu_hosts"]) for a in attempts(result)] == [("completed", 8)]
    no_tpu_left(result)
    # no Job of the run was killed by its deadline (the Jobs are gone: their events stay)
    assert "DeadlineExceeded" not in {e["reason"] for e in result.emu.list("events")}
    first_tpu_node = min(n.started for n in result.ledger.nodes if n.tpu)
    assert first_tpu_node >= SLICE_ARRIVES_S  # the wait really was 200 minutes long
    # every slice comes whole (8 nodes); one may come and go between two looks (here an idle
    # slice goes after 0.6 wall seconds, faster than Airflow moves from one step to the next)
    assert tpu["rule"] == "tpu_node_life" and tpu["nodes_seen"] in (8, 16, 24), tpu
    # at most what the nodes lived, each to the first look without it (the next step's start:
    # a few wall seconds, more on a loaded machine), a tenth of a second per slice for the
    # clocks: nothing of the 12 wall seconds each step waited for its slice (8 x 12 s more)
    assert 0 < tpu["pool_seconds"] * 8 <= counted_node_wall_seconds(result) + 0.1 * 3, tpu
    assert (tpu["price"]["capacity"], tpu["price"]["basis"]) == ("flex_start", UPPER_BOUND)


def test_a_spot_stockout_is_a_failed_deploy(airflow_db, tmp_path, capfd, e2e_report):
    """No Spot VMs in the zone: the static pool cannot be created, so create_cluster fails and
    says so (nothing waits for capacity); cleanup removes the half-made cluster.

    On main the failure was gcluster's last lines alone: no `Spot stockout` explanation."""
    case = Case("spot_stockout_fails_the_deploy", "failed")
    with Sandbox(tmp_path).up(env={"FAKE_GCLUSTER_FAIL": "spot-stockout"}) as box:
        result, log = reported_run(box, case, SPOT, capfd, e2e_report)
    assert result.task_states["create_cluster"] == "failed", result.task_states
    assert result.task_states["cleanup_cluster"] == "success", result.task_states
    assert "Spot stockout: us-east5-b had no 8 Spot ct6e-standard-4t VMs" in log
    assert "GCE_STOCKOUT" in log
    assert not [n for n in result.ledger.nodes if n.tpu] and result.clusters == {}


def reported_tpu(result: RunResult) -> dict[str, Any]:
    """The `tpu` section of the run report verify wrote next to the export."""
    export = result.xcoms["verify.return_value"]
    return json.loads(result.gcs.read(f"{export}run-report.json"))["tpu"]
