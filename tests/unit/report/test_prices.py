"""The price table (issue 42): prices by region and capacity mode, each with its source and
date; an unknown price is the on-demand price as an upper bound; a reservation is its
commitment; `make plan` shows the costs by region and mode for a ladder and a calendar run."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO
from tpu_rl.plan import main as plan
from tpu_rl.report import prices
from tpu_rl.settings.run_settings import load_settings

REPO_EXAMPLES = "include/examples"


def test_every_row_has_a_price_a_source_and_a_date():
    assert prices.PRICE_ROWS
    for gen, region, mode, usd, source, read in prices.PRICE_ROWS:
        assert gen and region and mode in prices.PRICE_MODES and usd > 0, (gen, region, mode)
        assert source and read <= prices.TABLE_DATE, (gen, region, mode)


def test_spot_differs_by_region_and_is_not_the_on_demand_price():
    """The billing catalogue's v6e Spot: about 1.215 in us-east5, 0.544 in us-central1."""
    east = prices.capacity_price("v6e-32", "us-east5-b", "spot")
    central = prices.capacity_price("v6e-32", "us-central1-a", "spot")
    assert (east.usd_per_chip_hour, central.usd_per_chip_hour) == (1.215, 0.544)
    assert east.basis == central.basis == prices.LIST_PRICE and east.region == "us-east5"


def test_an_unknown_price_is_the_regions_on_demand_price_as_an_upper_bound():
    flex = prices.capacity_price("v6e-32", "us-east5-b", "flex_start")
    assert (flex.usd_per_chip_hour, flex.basis) == (2.70, prices.UPPER_BOUND)
    assert prices.DWS_PAGE in flex.source and "53%" in flex.source
    spot_eu = prices.capacity_price("v6e-32", "europe-west4-a", "spot")
    assert (spot_eu.usd_per_chip_hour, spot_eu.basis) == (2.97, prices.UPPER_BOUND)
    # no on-demand price for the region, or an unknown generation: no price at all
    assert prices.capacity_price("v6e-32", "asia-northeast1-b", "spot") is None
    assert prices.capacity_price("v9x-32", "us-east5-b", "spot") is None


def test_a_reservation_is_priced_as_its_commitment():
    assert prices.BILLED_AS["reservation"] == prices.COMMITMENT
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
    assert "cost on this rung: 77.33 chip-hours in us-east5, $93.96 at $1.215" in out
    assert "no spend of the run's own: the reservation's commitment" in out
    assert f"us-central1 spot: 0.544 (list price; {prices.BILLING_CATALOGUE}" in out
    assert f"read {prices.TABLE_DATE}" in out
    rows = json.loads((tmp_path / "plan.json").read_text())["cost_estimate"]
    spot = next(r for r in rows if (r["region"], r["capacity"]) == ("us-central1", "spot"))
    assert spot["usd"] == pytest.approx(77.333 * 0.544, abs=0.01)
    assert spot["price"]["source"] == prices.BILLING_CATALOGUE and spot["price"]["read"]
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


@pytest.mark.parametrize(
    ("tpu_type", "why"),
    [("v5p-64", "no v5p price read from"), ("tpu7x-128", "no public TPU7x price")],
)
def test_a_generation_without_a_public_price_says_why_in_the_estimate(
    tmp_path, capsys, tpu_type, why
):
    """No v5p or TPU7x row (prices.NO_PUBLIC_PRICE): every mode reads "no price known" and the
    estimate's assumptions say why."""
    assert prices.regions(tpu_type) == [] and why in prices.no_price_why(tpu_type)
    assert prices.no_price_why("v6e-32") is None
    conf = json.loads((REPO / REPO_EXAMPLES / "tutorial.json").read_text())
    for key in ("topology", "compute_type", "cloud_image_name", "model_name"):
        conf.pop(key, None)
    model = "gpt-oss-20b" if tpu_type.startswith("v5p") else "qwen3-30b-a3b-base"
    (tmp_path / "conf.json").write_text(
        json.dumps({**conf, "model_name": model, "tpu_type": tpu_type})
    )
    assert plan([str(tmp_path / "conf.json"), str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "spot: " in out and out.count("no price known") >= 4
    assert f"- no price known: {why}" in out
