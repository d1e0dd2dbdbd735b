"""The run's spend limit against its estimate (validate), and how its training TPUs bill (the
reward wait's progress and spend lines, tpu_rl.watch.progress), from the price table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tpu_rl.report.estimate import (
    Estimate,
    ModeEstimate,
    cost_words,
    estimate_run,
    heldout_minutes,
    mode_in,
)
from tpu_rl.settings.capacity_modes import USAGE, WINDOW, capacity_mode
from tpu_rl.watch.progress import Spend

if TYPE_CHECKING:
    from tpu_rl.settings.fields import RunSettings


def _run_mode(settings: RunSettings, estimate: Estimate) -> ModeEstimate | None:
    return mode_in(estimate, str(settings.capacity), settings.zone or settings.region or "")


def estimate_problem(settings: RunSettings) -> str | None:
    """Why validate refuses the run: its estimate in its own capacity mode and region passes
    max_spend_usd (with the figures); None when it does not, or no limit or no spend is known."""
    if not settings.max_spend_usd:
        return None
    estimate = estimate_run(settings)
    mode = _run_mode(settings, estimate)
    if mode is None or mode.usd is None or mode.usd <= settings.max_spend_usd:
        return None
    return (
        f"max_spend_usd: the run's estimate is ${mode.usd:,.2f}, over the limit of "
        f"${settings.max_spend_usd:,.2f} ({mode.capacity} in {mode.region}: "
        f"{mode.billed_hours:.1f} TPU hours billed for {estimate.steps} steps at "
        f"{estimate.chips} chips; {cost_words(mode)}): raise the limit, or train fewer steps"
    )


def training_spend(settings: RunSettings) -> Spend:
    """How the training's TPUs bill, as tpu_rl.watch.progress.Spend takes it: the slice's
    price an hour (Spot, flex-start), a calendar window's estimated whole price, or a
    reservation's commitment; the limit and what follows it."""
    estimate = estimate_run(settings)
    mode = _run_mode(settings, estimate)
    price = mode.price if mode is not None else None
    billed_as = capacity_mode(settings.capacity).billed_as
    per_hour = estimate.chips * price.usd_per_chip_hour if price else None
    # a usage-billed slice bills the held-out evaluation after training by the hour too (a
    # calendar window is billed whole, a reservation by its commitment: nothing more)
    after = per_hour * heldout_minutes(settings) / 60 if per_hour and billed_as == USAGE else 0.0
    return Spend(
        capacity=str(settings.capacity),
        billed_as=billed_as,
        usd_per_hour=per_hour,
        window_usd=mode.usd if mode is not None and billed_as == WINDOW else None,
        max_usd=float(settings.max_spend_usd),
        action=settings.spend_limit_action,
        after_usd=round(after, 2),
    )
