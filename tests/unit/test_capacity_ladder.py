"""The capacity ladder (issue 30): its rungs, the rules validate keeps, the walk at deploy, and
what `make plan` renders for each rung."""

from __future__ import annotations

import json
import logging

import pytest
import yaml

from tests.conftest import REPO
from tpu_rl.cluster import climb, ladder
from tpu_rl.cluster.toolkit import ClusterToolkitError
from tpu_rl.plan import main
from tpu_rl.settings.run_settings import RunSettings, SettingsError, load_settings

EXAMPLE = REPO / "include" / "examples" / "capacity-ladder.json"
TWO_RUNGS = "reservation@us-east5-b, spot@us-east5-a"
STOCKOUT = (
    "gcluster deploy failed (exit 1); last lines:\nError waiting for creating GKE NodePool: "
    "ZONE_RESOURCE_POOL_EXHAUSTED: The zone 'projects/p/zones/{zone}' does not have enough "
    "resources available to fulfill the request. Try a different zone, or try again later."
)


def example() -> dict:
    return json.loads(EXAMPLE.read_text())


def test_rungs_are_read_in_order_and_an_empty_ladder_is_the_one_capacity():
    rungs = ladder.parse_ladder(" spot@us-east5-a,flex_start@us-east5-b ")
    assert [str(r) for r in rungs] == ["spot@us-east5-a", "flex_start@us-east5-b"]
    settings = load_settings({**example(), "capacity_ladder": ""})
    assert [str(r) for r in ladder.rungs(settings)] == ["reservation@us-east5-b"]


def test_a_rung_takes_its_mode_and_zone_and_a_reservation_only_when_it_is_one():
    settings = load_settings(example())
    spot = ladder.at_rung(settings, ladder.Rung("spot", "us-east5-a"))
    assert (spot.capacity, spot.zone, spot.reservation) == ("spot", "us-east5-a", "")
    assert (spot.region, spot.gcs_bucket) == (settings.region, settings.gcs_bucket)
    first = ladder.at_rung(settings, ladder.rungs(settings)[0])
    assert first.reservation == "v6e-32-reservation"


def test_a_rung_with_another_after_it_waits_the_rung_wait_and_the_last_the_pending_timeout():
    settings = load_settings({**example(), "pending_timeout_minutes": 60, "rung_wait_seconds": 600})
    waits = [ladder.wait_s(ladder.at_rung(settings, r)) for r in ladder.rungs(settings)]
    assert waits == [600.0, 600.0, 600.0, 3600.0]
    shorter = load_settings({**example(), "pending_timeout_minutes": 5, "rung_wait_seconds": 600})
    assert ladder.wait_s(shorter) == 300.0  # never past the pending timeout
    alone = load_settings({**example(), "capacity_ladder": "", "rung_wait_seconds": 60})
    assert ladder.wait_s(alone) == 3600.0  # no ladder: the pending timeout


@pytest.mark.parametrize(
    ("ladder_text", "expected"),
    [
        ("reservation@us-east5-b, spot", "rung 2 'spot' is not mode@zone"),
        ("reservation@us-east5-b, ondemand@us-east5-a", "mode 'ondemand' is not one of"),
        (
            "reservation@us-east5-b, spot@europe-west4-a",
            "rung 2 spot@europe-west4-a is outside the run's region us-east5: checkpoints stay "
            "in the regional bucket gs://my-tpu-project-rl",
        ),
        ("reservation@us-east5-b, reservation@us-east5-b", "repeats an earlier rung"),
        ("spot@us-east5-a, reservation@us-east5-b", "its first rung spot@us-east5-a must be"),
        ("reservation@us-east5-b, spot@US-EAST5-A", "rung 2 'spot@US-EAST5-A' is not mode@zone"),
        ("reservation@us-east5-b, calendar@us-east5-a", "rung 2 calendar@us-east5-a is a calendar"),
    ],
)
def test_validate_refuses_malformed_and_foreign_rungs(ladder_text, expected):
    with pytest.raises(SettingsError) as refused:
        load_settings({**example(), "capacity_ladder": ladder_text})
    assert any(expected in e for e in refused.value.errors), refused.value.errors


def test_a_ladder_needs_its_own_cluster_and_a_reservation_only_with_a_reservation_rung():
    conf = {**example(), "cluster_mode": "existing"}
    with pytest.raises(SettingsError, match="more than one rung with cluster_mode=existing"):
        load_settings(conf)
    spot_first = {**example(), "capacity": "spot", "zone": "us-east5-a"}
    ok = load_settings({**spot_first, "capacity_ladder": "spot@us-east5-a, reservation@us-east5-b"})
    assert ok.reservation == "v6e-32-reservation"  # a later rung consumes it
    with pytest.raises(SettingsError, match="takes no reservation"):
        load_settings({**spot_first, "capacity_ladder": "spot@us-east5-a, flex_start@us-east5-b"})


class Deploys:
    """A deploy that GKE refuses in the stocked-out zones (the walk's `deploy`)."""

    def __init__(self, stocked_out: set[str], error: str = STOCKOUT) -> None:
        self.stocked_out, self.error, self.tried = stocked_out, error, []
        self.pushed: dict[str, object] = {}

    def __call__(self, settings: RunSettings) -> None:
        self.tried.append((str(settings.capacity), settings.zone, settings.reservation))
        if settings.zone in self.stocked_out:
            raise ClusterToolkitError(self.error.format(zone=settings.zone))

    def push(self, key: str, value: object) -> None:
        self.pushed[key] = json.loads(json.dumps(value))


def test_the_walk_moves_past_a_stockout_and_says_why(caplog):
    settings = load_settings(
        {**example(), "capacity_ladder": "reservation@us-east5-b, spot@us-east5-a"}
    )
    deploys = Deploys({"us-east5-b"})
    with caplog.at_level(logging.INFO):
        rung = climb.climb(settings, deploys, logging.getLogger("t"), deploys.push)
    assert str(rung) == "spot@us-east5-a"
    assert deploys.tried == [
        ("reservation", "us-east5-b", "v6e-32-reservation"),
        ("spot", "us-east5-a", ""),
    ]
    assert deploys.pushed["rung"] == "spot@us-east5-a"
    tries = deploys.pushed["rungs"]
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
        climb.climb(settings, deploys, logging.getLogger("t"), deploys.push)
    message = str(failed.value)
    assert "none of its 2 rungs could give the whole slice" in message
    assert "rung 1 reservation@us-east5-b: Error waiting" in message
    assert "rung 2 spot@us-east5-a: Error waiting" in message and "zones/us-east5-a'" in message
    quota = Deploys({"us-east5-b"}, error="Error 403: Quota 'TPUS' exceeded")
    with pytest.raises(ClusterToolkitError, match="Quota"):
        climb.climb(settings, quota, logging.getLogger("t"), quota.push)
    assert len(quota.tried) == 1  # not a stockout: no other rung is tried


def test_one_rung_fails_as_its_deploy_fails_and_pushes_nothing():
    settings = load_settings({**example(), "capacity_ladder": ""})
    deploys = Deploys({"us-east5-b"})
    with pytest.raises(ClusterToolkitError, match=r"^gcluster deploy failed"):
        climb.climb(settings, deploys, logging.getLogger("t"), deploys.push)
    assert deploys.pushed == {}
    assert climb.pushed_rung(None) is None and climb.pushed_rung("x") is None


def test_plan_renders_what_each_rung_creates(tmp_path):
    assert main([str(EXAMPLE), str(tmp_path)]) == 0
    plan = json.loads((tmp_path / "plan.json").read_text())
    create = next(s for s in plan["steps"] if s["id"] == "create_cluster")
    rows = create["capacity_ladder"]
    assert [r["rung"] for r in rows] == [
        "reservation@us-east5-b",
        "flex_start@us-east5-b",
        "flex_start@us-east5-a",
        "spot@us-east5-a",
    ]
    assert "reservation v6e-32-reservation" in rows[0]["creates"]
    assert [r["waits_s"] for r in rows] == [900.0, 900.0, 900.0, 3600.0]  # defaults
    assert rows[3]["node_selector"] == {"cloud.google.com/gke-spot": "true"}
    assert "replacing the previous rung's pool" in rows[3]["creates"]
    deployment = yaml.safe_load((tmp_path / "rung-3.deployment.yaml").read_text())
    assert deployment["vars"]["zone"] == "us-east5-a"
    assert deployment["vars"]["enable_flex_start"] is True
    assert "reservation" not in deployment["vars"]
    assert rows[2]["files"] == ["rung-3.blueprint.yaml", "rung-3.deployment.yaml"]
