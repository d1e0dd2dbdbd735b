"""The price table: prices by region and capacity mode, each with its source and
date; an unknown price is the on-demand price as an upper bound; a reservation is its
commitment; `make plan` shows the costs by region and mode for a ladder and a calendar run."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO
from tpu_rl import prices
from tpu_rl.plan import main as plan
from tpu_rl.settings.capacity_modes import COMMITMENT, capacity_mode
from tpu_rl.settings.run_settings import load_settings

REPO_EXAMPLES = "include/examples"


def test_every_row_has_a_price_a_source_and_a_date():
    assert prices.PRICE_ROWS
    for gen, region, mode, usd, source, read in prices.PRICE_ROWS:
        assert gen and region and mode in prices.PRICE_MODES and usd > 0, (gen, region, mode)
        assert source in prices.SOURCES and read <= prices.TABLE_DATE, (gen, region, mode)


def test_spot_differs_by_region_and_is_not_the_on_demand_price():
    """The billing catalogue's v6e Spot, three snapshots: us-east5 1.08, 1.215, 1.35;
    us-central1 0.6483, 0.5442, 0.5729 (prices.CATALOGUE_ROWS, from the mirror's three snapshots:
    docs/sources.md#cloud-billing-catalog)."""
    east = prices.capacity_price("v6e-32", "us-east5-b", "spot")
    central = prices.capacity_price("v6e-32", "us-central1-a", "spot")
    assert (east.usd_per_chip_hour, central.usd_per_chip_hour) == (1.35, 0.6483)
    assert east.basis == central.basis == prices.LIST_PRICE and east.region == "us-east5"


def test_spot_is_dated_figures_a_range_where_sources_disagree_the_higher_quoted():
    """Each snapshot's Spot figure is a dated row of its own; the price is
    their range and quotes the higher; agreeing figures (v5p on demand) are one price."""
    v5p = prices.capacity_price("v5p-64", "us-east5-a", "spot")
    assert (v5p.low, v5p.usd_per_chip_hour) == (1.5601, 1.68) and v5p.read == "2026-12-06"
    assert "017e250 1.5601" in v5p.source and "8427bbf 1.68" in v5p.source
    assert "sources disagree: 1.5601-1.68, the higher quoted" in v5p.range_text
    on_demand = prices.listed("v5p-64", "us-east5", prices.ON_DEMAND)
    assert (on_demand.usd_per_chip_hour, on_demand.low, on_demand.range_text) == (4.2, None, "")
    assert all(row[5] for row in prices.PRICE_ROWS if row[:3] == ("v5p", "us-east5", "spot"))


def test_v5p_is_priced_in_every_region_the_billing_catalogue_lists():
    """v5p on demand 4.20 in us-central1, us-east1, us-east5; 4.2525
    europe-west4; 4.4595 europe-west1; 4.779 us-south1 (per chip: a tpu-v5p-N slice / N/2)."""
    expected = {
        "us-central1": 4.2,
        "us-east1": 4.2,
        "us-east5": 4.2,
        "europe-west4": 4.2525,
        "europe-west1": 4.4595,
        "us-south1": 4.779,
    }
    assert prices.regions("v5p-8") == sorted(expected) and prices.no_price_why("v5p-8") is None
    for region, usd in expected.items():
        found = prices.capacity_price("v5p-128", f"{region}-a", "flex_start")
        assert (found.usd_per_chip_hour, found.basis) == (usd, prices.UPPER_BOUND), region
        assert prices.MIRROR in found.source and found.read == "2026-12-06"
        assert prices.capacity_price("v5p-128", region, "spot").basis == prices.LIST_PRICE
    # no public v5p commitment price: a reservation's is the on-demand upper bound
    commitment = prices.capacity_price("v5p-32", "us-east5", "reservation")
    assert (commitment.usd_per_chip_hour, commitment.basis) == (4.2, prices.UPPER_BOUND)


def test_an_unknown_price_is_the_regions_on_demand_price_as_an_upper_bound():
    flex = prices.capacity_price("v6e-32", "us-east5-b", "flex_start")
    assert (flex.usd_per_chip_hour, flex.basis) == (2.70, prices.UPPER_BOUND)
    assert prices.DWS_PAGE in flex.source and "53%" in flex.source
    flex_eu = prices.capacity_price("v6e-32", "europe-west4-a", "flex_start")
    assert (flex_eu.usd_per_chip_hour, flex_eu.basis) == (2.97, prices.UPPER_BOUND)
    # no on-demand price for the region, or an unknown generation: no price at all
    assert prices.capacity_price("v6e-32", "asia-northeast1-b", "spot") is None
    assert prices.capacity_price("v9x-32", "us-east5-b", "spot") is None


def test_a_reservation_is_priced_as_its_commitment():
    assert capacity_mode("reservation").billed_as == COMMITMENT
    assert prices.capacity_price("v6e-32", "us-east5", "reservation").mode == prices.COMMIT_1Y
    found = prices.commitment_prices("v6e-32", "us-east5")
    assert [p.usd_per_chip_hour for p in found.values()] == [1.89, 1.22]


def test_make_plan_shows_a_ladders_costs_by_region_and_mode(tmp_path, capsys):
    """Each rung's cost (its mode in its zone's region) and every mode in every priced region,
    with the prices' sources and dates; plan.json has the same rows."""
    assert plan([f"{REPO_EXAMPLES}/capacity-ladder.json", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "in us-east5 (the run's):" in out and "in us-central1 (another region" in out
    assert "rung 2 flex_start@us-east5-b" in out
    assert "cost on this rung: 72.00 chip-hours in us-east5, at most $194.40" in out
    assert "cost on this rung: 77.33 chip-hours in us-east5, $104.40 at $1.35" in out
    assert "no spend of the run's own: the reservation's commitment" in out
    assert (
        "us-central1 spot: 0.6483 (list price; sources disagree: 0.5442-0.6483, the higher "
        f"quoted; {prices.MIRROR}"
    ) in out
    assert f"read {prices.TABLE_DATE}" in out
    rows = json.loads((tmp_path / "plan.json").read_text())["cost_estimate"]
    spot = next(r for r in rows if (r["region"], r["capacity"]) == ("us-central1", "spot"))
    assert spot["usd"] == pytest.approx(77.333 * 0.6483, abs=0.01)
    assert spot["price"]["source"].startswith(prices.MIRROR) and spot["price"]["read"]
    assert spot["price"]["low"] == 0.5442
    reservation = next(r for r in rows if r["chosen"])
    assert reservation["capacity"] == "reservation" and reservation["usd"] is None
    assert reservation["billed_as"] == "commitment" and len(reservation["commitment"]) == 2


def test_make_plan_shows_a_calendar_window_billed_whole(tmp_path, capsys, tutorial_conf):
    """A calendar window bills its whole length, at least a day: 32 chips x 24 h x 2.70 (the
    on-demand price, its upper bound) = $2,073.60, not the run's 2.4 h."""
    conf = {**tutorial_conf, "capacity": "calendar", "zone": "us-east5-a"}
    load_settings(conf)  # a valid calendar run
    path = tmp_path / "calendar.json"
    path.write_text(json.dumps(conf))
    assert plan([str(path), str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert (
        "    calendar (chosen): 77.33 chip-hours = 19.33 host-hours (2.42 h billed), $2,073.60: "
        "a 1-day window at $2.7 per chip-hour (upper bound), billed whole (at least one day)"
    ) in out


def test_a_generation_without_a_public_price_says_why_in_the_estimate(tmp_path, capsys):
    """No TPU7x row (prices.NO_PUBLIC_PRICE): every mode reads "no price known" and the
    estimate's assumptions say why, naming the setting for a contract's price."""
    why = "no public TPU7x price"
    assert prices.regions("tpu7x-128") == [] and why in prices.no_price_why("tpu7x-128")
    assert prices.no_price_why("v6e-32") is None and prices.no_price_why("v5p-64") is None
    conf = json.loads((REPO / REPO_EXAMPLES / "tutorial.json").read_text())
    for key in ("topology", "compute_type", "cloud_image_name", "model_name"):
        conf.pop(key, None)
    (tmp_path / "conf.json").write_text(
        json.dumps({**conf, "model_name": "qwen3-30b-a3b-base", "tpu_type": "tpu7x-128"})
    )
    assert plan([str(tmp_path / "conf.json"), str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "spot: " in out and out.count("no price known") >= 4
    assert f"- no price known: {why}" in out and "negotiated_usd_per_chip_hour" in out


def test_a_negotiated_price_prices_the_estimate_the_spend_limit_and_the_report(tutorial_conf):
    """TPU7x has no public price and commitments are negotiated: the run's
    negotiated_usd_per_chip_hour prices its own capacity mode in the estimate (other modes as
    the table has them), the spend limit and the run report."""
    from tpu_rl.report import billing, estimate, spend_limit
    from tpu_rl.report.run_report import cost_text

    cell = {k: v for k, v in tutorial_conf.items() if k not in ("topology", "compute_type")}
    conf = {**cell, "model_name": "qwen3-30b-a3b-base", "tpu_type": "tpu7x-128"}
    conf = {**conf, "capacity": "spot", "reservation": "", "negotiated_usd_per_chip_hour": 5.5}
    s = load_settings(conf)
    found = estimate.estimate_run(s)
    spot = estimate.mode_in(found, "spot", s.zone)
    assert spot.price.basis == prices.NEGOTIATED and spot.price.usd_per_chip_hour == 5.5
    assert spot.usd == pytest.approx(64 * spot.billed_hours * 5.5)
    assert estimate.mode_in(found, "flex_start", s.zone).price is None  # not the run's mode
    assert "spot: the run's negotiated price, $5.5 per chip-hour" in "\n".join(found.assumptions)
    limit = load_settings({**conf, "max_spend_usd": round(spot.usd / 2, 2)})
    assert spend_limit.estimate_problem(limit).startswith(
        f"max_spend_usd: the run's estimate is ${spot.usd:,.2f}, over"
    )
    assert spend_limit.training_spend(limit).usd_per_hour == 64 * 5.5
    tpu = billing.tpu_billing(s, 16, [], (0.0, 7200.0), {"created_pool": 7200.0}, "now")
    assert tpu["estimated_cost_usd"] == pytest.approx(64 * 2 * 5.5)
    assert tpu["price"]["basis"] == prices.NEGOTIATED
    assert "at 5.5 USD per chip-hour, the spot price in us-east5, negotiated" in cost_text(
        {**tpu, "tpu_type": s.tpu_type}, "spot"
    )
    # a reservation's negotiated price is its commitment's
    reserved = estimate.estimate_run(
        load_settings({**tutorial_conf, "negotiated_usd_per_chip_hour": 1.5})
    )
    own = estimate.mode_in(reserved, "reservation", "us-east5")
    assert [p.usd_per_chip_hour for p in own.commitment] == [1.5] and own.usd is None
