"""The cost and time estimate before a run: per capacity mode, chip-hours and host-hours named as
such, dollars from the price table, the assumptions stated; in `make plan` and the form."""

from __future__ import annotations

import dataclasses

import pytest

from tpu_rl import prices
from tpu_rl.dag.params import dag_params
from tpu_rl.plan import main as plan
from tpu_rl.report import estimate
from tpu_rl.settings.run_settings import load_settings


def test_the_tutorials_example_by_hand(tutorial_conf):
    """include/examples/tutorial.json: 1 x v6e-32 (4x8 = 32 chips; ct6e-standard-4t has 4 chips a
    host: 8 hosts) in us-east5, a cluster the run creates and destroys, num_batches 50.

    Time: create 30 + convert 30 + backend 5 + train 50 x 60 s = 50 + export 20 + destroy 10
    = 145 min = 2.4167 h.
    A static pool (reservation, calendar, Spot) exists the whole run: 32 x 145/60 = 77.33
    chip-hours, 8 x 145/60 = 19.33 host-hours. Spot in us-east5 at 1.35 (the highest of the
    snapshots' 1.08-1.35): 77.333 x 1.35 = $104.40. Calendar: a whole-day window (the run's
    2.4 h inside it), 32 x 24 x 2.70 (on-demand, the upper bound) = $2,073.60. Reservation: paid
    by its commitment, no spend of the run's.
    Flex-start (convert + backend + train + export = 105 min, + 3 x 10 min scale-down = 135 min
    = 2.25 h): 32 x 2.25 = 72 chip-hours, at most 72 x 2.70 = $194.40 (upper bound)."""
    found = estimate.estimate_run(load_settings(tutorial_conf))
    assert (found.chips, found.hosts, found.steps) == (32, 8, 50)
    assert found.wall_minutes == pytest.approx(145.0)
    assert found.region == "us-east5" and found.run_regions == ("us-east5",)
    modes = {m.capacity: m for m in found.modes if m.region == "us-east5"}
    assert set(modes) == {"reservation", "calendar", "flex_start", "spot"}
    for static in ("reservation", "calendar", "spot"):
        assert modes[static].chip_hours == pytest.approx(77.333, abs=1e-3)
        assert modes[static].host_hours == pytest.approx(19.333, abs=1e-3)
    assert modes["spot"].usd == pytest.approx(104.40, abs=0.01)
    assert modes["spot"].price.basis == prices.LIST_PRICE
    assert modes["calendar"].usd == pytest.approx(2073.60)
    assert modes["reservation"].usd is None and modes["reservation"].billed_as == "commitment"
    assert [p.usd_per_chip_hour for p in modes["reservation"].commitment] == [1.89, 1.22]
    assert modes["flex_start"].chip_hours == pytest.approx(72.0)
    assert modes["flex_start"].host_hours == pytest.approx(18.0)
    assert modes["flex_start"].usd == pytest.approx(194.40)
    assert modes["flex_start"].price.basis == prices.UPPER_BOUND
    lines = estimate.format_estimate(found)
    text = "\n".join(lines)
    assert lines[0] == (
        "Estimate for 1 x v6e-32 (32 chips on 8 hosts of ct6e-standard-4t), 50 training steps:"
    )
    assert lines[1].startswith("  time: about 2.4 h (create_cluster 30 min, convert 30 min")
    assert lines[2] == "  in us-east5 (the run's):"
    assert "    reservation (chosen): 77.33 chip-hours = 19.33 host-hours (2.42 h billed), " in text
    assert "no spend of the run's own: the reservation's commitment" in text
    assert "flex_start: 72.00 chip-hours" in text
    assert "at most $194.40 at $2.7 per chip-hour (upper bound)" in text
    assert "spot: 77.33 chip-hours = 19.33 host-hours (2.42 h billed), $104.40 at $1.35" in text
    assert "$2,073.60: a 1-day window at $2.7 per chip-hour (upper bound)" in text


def test_an_existing_cluster_bills_no_creation_and_two_slices_double(tutorial_conf):
    """No create (30 min) or destroy (10 min): 105 min; two slices: 64 chips on 16 hosts (the
    estimate counts the slices it is given: validate refuses a two-slice run, which MaxText 0.2.4
    cannot mesh, tpu_rl.settings.cell_rules)."""
    existing = load_settings({**tutorial_conf, "cluster_mode": "existing"})
    settings = dataclasses.replace(existing, cluster_nodepool_count=2)
    found = estimate.estimate_run(settings)
    assert found.wall_minutes == pytest.approx(105.0) and (found.chips, found.hosts) == (64, 16)
    reservation = next(m for m in found.modes if m.capacity == "reservation")
    assert reservation.chip_hours == pytest.approx(64 * 105 / 60)


def test_the_prices_source_and_date_and_the_assumptions_are_stated(tutorial_conf):
    text = "\n".join(estimate.format_estimate(estimate.estimate_run(load_settings(tutorial_conf))))
    assert prices.TABLE_DATE in text and prices.PRICING_PAGE in text and prices.DWS_PAGE in text
    assert "us-east5 on_demand: 2.7 (list price" in text
    assert "us-east5 spot: 1.35 (list price; sources disagree: 1.08-1.35, the higher quoted" in text
    assert "us-east5 commit_3y: 1.22 (list price" in text
    assert "assumed, not measured" in text and "a GRPO step 60 s" in text
    assert "CPU nodes" in text and "TPU-hours" not in text


def test_an_unknown_tpu_generation_has_hours_but_no_dollars(tutorial_conf):
    settings = dataclasses.replace(load_settings(tutorial_conf), tpu_type="v9x-32")
    found = estimate.estimate_run(settings)
    assert all(m.usd is None and m.chip_hours > 0 for m in found.modes)
    assert "no price known" in "\n".join(estimate.format_estimate(found))


def test_make_plan_prints_the_estimate(tmp_path, capsys, tutorial_conf):
    from tests.conftest import TUTORIAL_CONF

    assert plan([str(TUTORIAL_CONF), str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert estimate.format_estimate(estimate.estimate_run(load_settings(tutorial_conf)))[0] in out
    assert "spot: 77.33 chip-hours = 19.33 host-hours" in out


def test_the_trigger_form_shows_the_defaults_estimate_as_a_table_under_the_capacity_field():
    """The estimate is a Markdown table (time,
    chip-hours, dollars per capacity mode), shown by Airflow 3.3.2's form as the Param's
    description_md (a null description), with what more steps add."""
    param = dag_params()["capacity"]
    text = param.schema["description_md"]
    assert param.description is None and text.startswith("How the run gets its TPUs")
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert table[:2] == ["| capacity | TPUs billed | chip-hours | cost |", "|---|---|---|---|"]
    rows = {line.split(" | ")[0].strip("| "): line for line in table[2:]}
    assert list(rows) == ["reservation", "calendar", "flex_start", "spot"]
    assert rows["flex_start"] == "| flex_start | 2.2 h | 72.0 | at most $194.40 |"
    assert rows["spot"] == "| spot | 2.4 h | 77.3 | $104.40 |"
    assert "commitment" in rows["reservation"] and "whole-day window" in rows["calendar"]
    assert "us-east5" in text  # the tutorial's region: the form's defaults have none
    assert "Each 10 more steps: +10 min, +5.3 chip-hours" in text and prices.TABLE_DATE in text
    the_estimate, link = text.split("**Estimate")[1].split("**Your settings:**")
    lines = the_estimate.splitlines()
    words = [w for line in lines if not line.startswith("|") for w in line.split()]
    assert len(words) < 60, len(words)
    # the settings as filled in: the estimate page, in a new tab (Airflow's Markdown links)
    assert "[Estimate these settings](/tpu-rl/estimate?conf=" in link and "(a new tab)" in link
    assert "Advanced Options > Configuration JSON" in link and len(link.split()) < 50


class Reads:
    """Settings that record which of them are read."""

    def __init__(self, settings: object) -> None:
        self.settings, self.read = settings, set()

    def __getattr__(self, name: str) -> object:
        self.read.add(name)
        return getattr(self.settings, name)


def test_the_figures_come_from_the_settings_named_so(tutorial_conf):
    """The estimate page withholds the figures while one of FIGURE_SETTINGS is invalid: every
    setting the estimate reads is one of them or only chooses the regions priced, whichever
    way the cluster and capacity are chosen."""
    read = set()
    tutorial = load_settings(tutorial_conf)
    variants = (
        {},
        {"cluster_mode": "existing"},
        {"keep_cluster": True, "zone": ""},
        {"heldout_tasks": ["gsm8k"]},
    )
    for changes in variants:
        settings = Reads(dataclasses.replace(tutorial, **changes))
        estimate.estimate_run(settings)
        read |= settings.read
    assert read == estimate.FIGURE_SETTINGS | estimate.PLACE_SETTINGS


def test_a_rung_in_another_zone_says_what_its_head_and_workers_cost_across_zones(
    tmp_path, capsys, tutorial_conf
):
    """On a ladder the Pathways head stays on cpu-np in the first rung's zone
    while a later rung's TPU pool is in its own: the estimate and `make plan` name the
    inter-zone transfer price (USD 0.01 per GiB) for each such rung, and none for a rung in the
    cluster's zone."""
    import json

    ladder = "reservation@us-east5-b, flex_start@us-east5-b, spot@us-east5-a"
    conf = {**tutorial_conf, "capacity_ladder": ladder}
    found = estimate.estimate_run(load_settings(conf))
    far = [line for line in found.assumptions if "different zones" in line]
    assert far == [
        "capacity ladder rung spot@us-east5-a: the Pathways head (cpu-np, us-east5-b) and its "
        "TPU workers (us-east5-a) are in different zones: every byte between them is inter-zone "
        "transfer at $0.01 per GiB (https://cloud.google.com/vpc/network-pricing), not counted "
        "(its volume is not known), and each call between them crosses zones"
    ]
    path = tmp_path / "ladder.json"
    path.write_text(json.dumps(conf))
    assert plan([str(path), str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert out.count("    across zones: the Pathways head (cpu-np, us-east5-b)") == 1
    steps = json.loads((tmp_path / "out" / "plan.json").read_text())["steps"]
    rungs = next(s for s in steps if s["id"] == "create_cluster")["capacity_ladder"]
    assert [r["cross_zone"] is not None for r in rungs] == [False, False, True]


def test_the_heldout_evaluation_holds_the_slice_and_counts_toward_the_spend(tutorial_conf):
    """Each model scored (the steps, the base model, a champion) holds the slice for its
    assumed minutes: the time, the billed hours and validate's spend check count them."""
    off = estimate.estimate_run(load_settings(tutorial_conf))
    on_conf = {**tutorial_conf, "heldout_tasks": ["gsm8k"], "heldout_top_k": 2}
    on = estimate.estimate_run(load_settings(on_conf))
    minutes = 4 * estimate.HELDOUT_MODEL_MINUTES
    assert dict(on.phases)["evaluate_heldout"] == minutes
    assert on.wall_minutes == pytest.approx(off.wall_minutes + minutes)
    for before, after in zip(off.modes, on.modes, strict=True):
        assert after.billed_hours == pytest.approx(before.billed_hours + minutes / 60)
    assert any("held-out evaluation: 15 min a model" in line for line in on.assumptions)
