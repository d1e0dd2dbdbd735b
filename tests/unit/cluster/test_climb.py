"""The capacity ladder's walk at deploy (tpu_rl.cluster.climb): each rung deployed in turn until
one stands, a stockout left for the next rung, and the tries it records."""

from __future__ import annotations

import json
import logging

import pytest

from tests.support.ladder import TWO_RUNGS, example
from tpu_rl.cluster import climb
from tpu_rl.cluster.rung_record import standing_rung
from tpu_rl.cluster.toolkit import ClusterToolkitError
from tpu_rl.settings.run_settings import RunSettings, load_settings
from tpu_rl.settings.rungs import Rung

STOCKOUT = (
    "gcluster deploy failed (exit 1); last lines:\nError waiting for creating GKE NodePool: "
    "ZONE_RESOURCE_POOL_EXHAUSTED: The zone 'projects/p/zones/{zone}' does not have enough "
    "resources available to fulfill the request. Try a different zone, or try again later."
)


class Deploys:
    """A deploy that GKE refuses in the stocked-out zones (the walk's `deploy`)."""

    def __init__(self, stocked_out: set[str], error: str = STOCKOUT) -> None:
        self.stocked_out, self.error, self.tried = stocked_out, error, []
        self.tries: list[dict] = []  # the ladder's record as the walk last wrote it

    def __call__(self, settings: RunSettings) -> None:
        self.tried.append((str(settings.capacity), settings.zone, settings.reservation))
        if settings.zone in self.stocked_out:
            raise ClusterToolkitError(self.error.format(zone=settings.zone))

    def record(self, tries: list[dict]) -> None:
        self.tries = json.loads(json.dumps(tries))


def test_the_walk_moves_past_a_stockout_and_says_why(caplog):
    settings = load_settings(
        {**example(), "capacity_ladder": "reservation@us-east5-b, spot@us-east5-a"}
    )
    deploys = Deploys({"us-east5-b"})
    with caplog.at_level(logging.INFO):
        rung = climb.climb(settings, deploys, logging.getLogger("t"), deploys.record)
    assert str(rung) == "spot@us-east5-a"
    assert deploys.tried == [
        ("reservation", "us-east5-b", "v6e-32-reservation"),
        ("spot", "us-east5-a", ""),
    ]
    tries = deploys.tries
    assert str(standing_rung(tries)) == "spot@us-east5-a"  # the run stands on the newest try
    assert [(t["rung"], t["outcome"]) for t in tries] == [
        ("reservation@us-east5-b", "stockout"),
        ("spot@us-east5-a", "ready"),
    ]
    assert tries[0]["reason"].startswith("Error waiting for creating GKE NodePool: ZONE_RESOURCE")
    assert "rung 1 reservation@us-east5-b could not give the whole slice" in caplog.text
    assert "moves to rung 2 spot@us-east5-a" in caplog.text


def test_every_rung_refused_fails_with_each_reason_and_other_errors_are_not_stockouts():
    settings = load_settings(
        {**example(), "capacity_ladder": "reservation@us-east5-b, spot@us-east5-a"}
    )
    deploys = Deploys({"us-east5-b", "us-east5-a"})
    with pytest.raises(ClusterToolkitError) as failed:
        climb.climb(settings, deploys, logging.getLogger("t"), deploys.record)
    message = str(failed.value)
    assert "none of its 2 rungs could give the whole slice" in message
    assert "rung 1 reservation@us-east5-b: Error waiting" in message
    assert "rung 2 spot@us-east5-a: Error waiting" in message and "zones/us-east5-a'" in message
    quota = Deploys({"us-east5-b"}, error="Error 403: Quota 'TPUS' exceeded")
    with pytest.raises(ClusterToolkitError, match="Quota"):
        climb.climb(settings, quota, logging.getLogger("t"), quota.record)
    assert len(quota.tried) == 1  # not a stockout: no other rung is tried


def test_one_rung_fails_as_its_deploy_fails_and_records_nothing():
    settings = load_settings({**example(), "capacity_ladder": ""})
    deploys = Deploys({"us-east5-b"})
    with pytest.raises(ClusterToolkitError, match=r"^gcluster deploy failed"):
        climb.climb(settings, deploys, logging.getLogger("t"), deploys.record)
    assert deploys.tries == []
    assert standing_rung([]) is None and standing_rung([{"rung": "x"}]) is None


# What GKE, its autoscaler and terraform answer when a rung has no capacity
TERRAFORM_TIMEOUT = (
    "gcluster deploy failed (exit 1); last lines:\nError: Error waiting for creating GKE "
    "NodePool: timeout while waiting for state to become 'DONE' (last state: 'RUNNING', "
    "timeout: 30m0s)"
)


@pytest.mark.parametrize(
    "error",
    [
        TERRAFORM_TIMEOUT,
        "Error: Error waiting for creating GKE NodePool: RESOURCE_POOL_EXHAUSTED: no v6e in {zone}",
        "Error: googleapi: Error 400: No available resources in specified reservations, {zone}",
        "Error: Error waiting for creating GKE NodePool: Resource Pool Exhausted in {zone}",
        "Error: INSUFFICIENT_CAPACITY: {zone} cannot fulfil the request",
    ],
    ids=["terraform-create-timeout", "autoscaler-code", "reservations", "case", "insufficient"],
)
def test_a_ladder_moves_past_every_way_google_says_no_capacity(error):
    settings = load_settings({**example(), "capacity_ladder": TWO_RUNGS})
    deploys = Deploys({"us-east5-b"}, error=error)
    rung = climb.climb(settings, deploys, logging.getLogger("t"), deploys.record)
    assert str(rung) == "spot@us-east5-a", deploys.tries
    first = deploys.tries[0]
    assert (first["outcome"] == "stockout" and "us-east5-b" in first["reason"]) or (
        "timeout while waiting for state" in first["reason"]
    ), first


def test_a_move_after_the_deploy_stood_starts_the_walk_at_the_next_rung_keeping_the_tries():
    settings = load_settings({**example(), "capacity_ladder": TWO_RUNGS})
    before = [climb.rung_try(Rung("reservation", "us-east5-b"), "t0", climb.NO_SLICE, "late")]
    deploys = Deploys(set())
    rung = climb.climb(settings, deploys, logging.getLogger("t"), deploys.record, 1, before)
    assert str(rung) == "spot@us-east5-a" and deploys.tried == [("spot", "us-east5-a", "")]
    assert [(t["rung"], t["outcome"]) for t in deploys.tries] == [
        ("reservation@us-east5-b", "no_slice"),
        ("spot@us-east5-a", "ready"),
    ]


def test_a_rung_left_ends_its_standing_try_keeping_when_it_started():
    spot = Rung("spot", "us-east5-a")
    tries = [climb.rung_try(spot, "2027-01-01T00:00:00+00:00", climb.READY, None)]
    left = climb.left_rung(tries, spot, climb.ENDED, "the calendar window ended")
    assert len(left) == 1 and tries[0]["outcome"] == climb.READY  # the record is not changed
    assert left[0]["started"] == "2027-01-01T00:00:00+00:00"
    assert (left[0]["outcome"], left[0]["reason"]) == (climb.ENDED, "the calendar window ended")
    other = climb.left_rung(tries, Rung("flex_start", "us-east5-b"), climb.NO_SLICE, "no slice")
    assert [t["rung"] for t in other] == ["spot@us-east5-a", "flex_start@us-east5-b"]
    assert other[1]["started"] != "2027-01-01T00:00:00+00:00"


def test_the_change_line_and_the_failure_name_the_rungs_one_based():
    a, b = Rung("spot", "us-east5-a"), Rung("flex_start", "us-east5-b")
    line = climb.change_line(0, a, "ZONE_RESOURCE_POOL_EXHAUSTED", b)
    assert "rung 1 spot@us-east5-a could not give the whole slice (ZONE_RESOURCE" in line
    assert line.endswith("moves to rung 2 flex_start@us-east5-b")
    tries = [{"rung": str(a), "reason": "x"}, {"rung": str(b), "reason": "y"}]
    failure = climb.exhausted(tries)
    assert "none of its 2 rungs" in failure
    assert failure.endswith("rung 1 spot@us-east5-a: x; rung 2 flex_start@us-east5-b: y")
