"""The capacity ladder: its rungs, the rules validate keeps, the walk at deploy, and
what `make plan` renders for each rung."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import yaml

from sandbox.paths import BLUEPRINT_FIXTURES
from tests.support.ladder import EXAMPLE, TWO_RUNGS, example
from tpu_rl.cluster import blueprint, ladder
from tpu_rl.plan import main
from tpu_rl.settings.run_settings import RunSettings, SettingsError, load_settings
from tpu_rl.settings.rungs import Rung, parse_ladder

BLUEPRINT = (BLUEPRINT_FIXTURES / "gke-tpu-v6e-advanced.yaml").read_text()  # the tutorial's


def test_rungs_are_read_in_order_and_an_empty_ladder_is_the_one_capacity():
    rungs = parse_ladder(" spot@us-east5-a,flex_start@us-east5-b ")
    assert [str(r) for r in rungs] == ["spot@us-east5-a", "flex_start@us-east5-b"]
    settings = load_settings({**example(), "capacity_ladder": ""})
    assert [str(r) for r in ladder.rungs(settings)] == ["reservation@us-east5-b"]


def test_a_rung_takes_its_mode_and_zone_and_a_reservation_only_when_it_is_one():
    settings = load_settings(example())
    spot = ladder.at_rung(settings, Rung("spot", "us-east5-a"))
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


def ladder_blueprint(settings: RunSettings) -> dict:
    return yaml.safe_load(blueprint.edit_blueprint(BLUEPRINT, settings, "d"))


def pool_and_cluster(bp: dict) -> tuple[dict, dict]:
    mods = {m["source"]: m["settings"] for g in bp["deployment_groups"] for m in g["modules"]}
    return mods["modules/compute/gke-node-pool"], mods["modules/scheduler/gke-cluster"]


def test_each_rung_has_its_own_pool_with_a_create_timeout_above_gkes_wait():
    """Findings 2 and 4: terraform's create timeout outlasts GKE's 35-minute IGM wait, and a
    rung's pool has its own name (ForceNew: a move makes a new pool, never moves one)."""
    settings = load_settings({**example(), "capacity_ladder": TWO_RUNGS})
    names = []
    for rung in ladder.rungs(settings):
        pool, _ = pool_and_cluster(ladder_blueprint(ladder.at_rung(settings, rung)))
        names.append(pool["name"])
        assert pool["timeout_create"] == "45m"  # GKE's IGM wait is 35m
        assert pool["zones"] == ["$(vars.zone)"]  # the pool follows the rung's zone
    assert names == ["gke-tpu-v6e-pool", "gke-tpu-v6e-pool-rung2"]
    alone = load_settings({**example(), "capacity_ladder": ""})
    pool, _ = pool_and_cluster(ladder_blueprint(alone))  # no ladder: the tutorial's pool
    assert "timeout_create" not in pool and pool["name"] == "gke-tpu-v6e-pool"
    assert "cluster_zone" not in blueprint.deployment_vars(alone)


def test_the_cluster_and_its_cpu_pools_stay_in_the_first_rungs_zone():
    """system_node_pool_zones feeds the cluster's node_locations, the system pool and
    cpu-np; on every rung it reads vars.cluster_zone, the first rung's zone."""
    settings = load_settings({**example(), "capacity_ladder": TWO_RUNGS})
    on_a = ladder.at_rung(settings, Rung("spot", "us-east5-a"))
    bp = ladder_blueprint(on_a)
    _, cluster = pool_and_cluster(bp)
    assert cluster["system_node_pool_zones"] == ["$(vars.cluster_zone)"]
    assert "cluster_zone" in bp["vars"]
    variables = blueprint.deployment_vars(on_a)
    assert (variables["zone"], variables["cluster_zone"]) == ("us-east5-a", "us-east5-b")


def test_plan_shows_each_rungs_own_pool_and_what_stays():

    from tpu_rl.plan import main as plan_main

    with tempfile.TemporaryDirectory() as out:
        assert plan_main([str(EXAMPLE), out]) == 0
        plan = json.loads((Path(out) / "plan.json").read_text())
        second = yaml.safe_load((Path(out) / "rung-4.deployment.yaml").read_text())
    rows = next(s for s in plan["steps"] if s["id"] == "create_cluster")["capacity_ladder"]
    assert [r["tpu_pool"] for r in rows] == [
        "gke-tpu-v6e-pool",
        "gke-tpu-v6e-pool-rung2",
        "gke-tpu-v6e-pool-rung3",
        "gke-tpu-v6e-pool-rung4",
    ]
    assert all(r["timeout_create"] == "45m" for r in rows)
    assert "the cluster's zone us-east5-b" in rows[3]["stays"] and "cpu-np" in rows[3]["stays"]
    assert (second["vars"]["zone"], second["vars"]["cluster_zone"]) == ("us-east5-a", "us-east5-b")
