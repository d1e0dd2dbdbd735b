"""max_spend_usd against the run's estimate (validate) and the training's billing that the reward
wait's progress lines use (tpu_rl.report.spend_limit)."""

from __future__ import annotations

import dataclasses

from tpu_rl.report import estimate, spend_limit
from tpu_rl.settings.run_settings import load_settings
from tpu_rl.settings.validation import validate


def test_validate_refuses_a_run_whose_estimate_passes_the_limit_with_the_figures(tutorial_conf):
    settings = dataclasses.replace(load_settings(tutorial_conf), capacity="spot")
    assert spend_limit.estimate_problem(settings) is None  # no limit by default
    own = estimate.mode_in(estimate.estimate_run(settings), settings.capacity, settings.zone)
    low = dataclasses.replace(settings, max_spend_usd=round(own.usd / 2, 2))
    problem = spend_limit.estimate_problem(low)
    assert problem.startswith(f"max_spend_usd: the run's estimate is ${own.usd:,.2f}, over")
    assert f"${low.max_spend_usd:,.2f}" in problem
    assert spend_limit.estimate_problem(dataclasses.replace(low, max_spend_usd=own.usd)) is None


def test_the_training_bills_per_hour_of_its_chips_or_not_at_all_on_a_reservation(tutorial_conf):
    settings = dataclasses.replace(load_settings(tutorial_conf), capacity="spot", max_spend_usd=50)
    spend = spend_limit.training_spend(settings)
    found = estimate.estimate_run(settings)
    own = estimate.mode_in(found, "spot", settings.zone)
    assert spend.billed_as == "usage" and spend.max_usd == 50.0
    assert spend.usd_per_hour == found.chips * own.price.usd_per_chip_hour > 0
    reserved = spend_limit.training_spend(dataclasses.replace(settings, capacity="reservation"))
    assert reserved.billed_as == "commitment"


def test_a_negative_limit_is_a_settings_problem(tutorial_conf):
    settings = dataclasses.replace(load_settings(tutorial_conf), max_spend_usd=-1.0)
    assert any(p.startswith("max_spend_usd: must be 0") for p in validate(settings))


def test_the_heldout_evaluation_bills_after_training_on_a_usage_billed_slice(tutorial_conf):
    """Its assumed minutes at the slice's price an hour (estimate.heldout_minutes): counted by
    the reward wait with its projection; nothing more on a reservation."""
    conf = {**tutorial_conf, "heldout_tasks": ["gsm8k"], "max_spend_usd": 500}
    spot = dataclasses.replace(load_settings(conf), capacity="spot")
    spend = spend_limit.training_spend(spot)
    minutes = estimate.heldout_minutes(spot)
    assert minutes == 60 and spend.after_usd == round(spend.usd_per_hour * minutes / 60, 2) > 0
    off = spend_limit.training_spend(dataclasses.replace(spot, heldout_tasks=[]))
    assert off.after_usd == 0
    reserved = spend_limit.training_spend(dataclasses.replace(spot, capacity="reservation"))
    assert reserved.after_usd == 0
