"""A run's cost and time before it runs: chip-hours, host-hours and dollars per capacity mode.

The time is the run's steps at assumed durations (ASSUMED_MINUTES, ASSUMED_STEP_SECONDS: not
measured; a real run's step durations are in its report). What bills follows the rules of
tpu_rl.report.billing: a static pool (reservation or Spot; gcluster makes a Spot pool static)
bills from the cluster's creation to its destruction, or for the run's span on an existing
cluster; a flex-start pool only while the TPU steps hold it, plus the autoscaler's scale-down
tail after each. Dollars are chip-hours x the mode's price (tpu_rl.report.prices, with its
source and date). Pure arithmetic on the settings: the DAG's parse computes the form's estimate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tpu_rl.cluster.tpu import CHIPS_PER_HOST
from tpu_rl.report import prices

if TYPE_CHECKING:
    from tpu_rl.settings.run_settings import RunSettings

CAPACITY_MODES = ("reservation", "calendar", "flex_start", "spot")
STATIC_MODES = ("reservation", "calendar", "spot")  # calendar: the reservation's pool
# Assumed minutes per step; none is measured by this repository.
ASSUMED_MINUTES = {
    "create_cluster": 30.0,  # gcluster deploy: network, GKE cluster, CPU and TPU node pools
    "convert": 30.0,  # the Hugging Face -> MaxText conversion (skipped when done before)
    "start_backend": 5.0,  # the Pathways backend's pods up
    "export": 20.0,  # MaxText -> Hugging Face export
    "destroy_cluster": 10.0,  # gcluster destroy
}
ASSUMED_STEP_SECONDS = 60.0  # one GRPO training step (num_batches steps)
# GKE's autoscaler removes an idle flex-start node 1-10 minutes after its pods end (DESIGN 7,
# "Billing"): the upper bound, after each of the three steps that hold the slice.
SCALE_DOWN_TAIL_MINUTES = 10.0
FLEX_START_SCALE_UPS = 3  # convert, the backend (training), export


@dataclass(frozen=True)
class ModeEstimate:
    """What one capacity mode bills for the run."""

    capacity: str
    billed_hours: float  # hours the TPU pool bills
    chip_hours: float
    host_hours: float
    usd: float | None  # None: no price known for the TPU type
    price: prices.Price | None


@dataclass(frozen=True)
class Estimate:
    """The run's time and, per capacity mode, what it bills; `capacity` is the run's own mode."""

    tpu_type: str
    compute_type: str
    slices: int
    chips: int
    hosts: int
    steps: int
    capacity: str
    phases: tuple[tuple[str, float], ...]  # (step, minutes) in run order
    modes: tuple[ModeEstimate, ...]
    assumptions: tuple[str, ...]

    @property
    def wall_minutes(self) -> float:
        """The run's duration, waits for capacity not included."""
        return sum(minutes for _, minutes in self.phases)


def _phases(settings: RunSettings) -> tuple[tuple[str, float], ...]:
    """The run's steps with their assumed minutes: training is num_batches x the step time."""
    created = settings.cluster_mode == "create"
    destroyed = created and not settings.keep_cluster
    training = settings.num_batches * ASSUMED_STEP_SECONDS / 60
    phases = [
        ("create_cluster", ASSUMED_MINUTES["create_cluster"] if created else 0.0),
        ("convert", ASSUMED_MINUTES["convert"]),
        ("start_backend", ASSUMED_MINUTES["start_backend"]),
        ("train", training),
        ("export", ASSUMED_MINUTES["export"]),
        ("destroy_cluster", ASSUMED_MINUTES["destroy_cluster"] if destroyed else 0.0),
    ]
    return tuple((step, minutes) for step, minutes in phases if minutes)


def billed_minutes(phases: tuple[tuple[str, float], ...], capacity: str) -> float:
    """Minutes the TPU pool bills: a static pool the whole run (the cluster's life, or the run's
    span on an existing cluster), a flex-start pool its TPU steps plus their scale-down tails."""
    if capacity in STATIC_MODES:
        return sum(minutes for _, minutes in phases)
    held = sum(m for step, m in phases if step not in ("create_cluster", "destroy_cluster"))
    return held + FLEX_START_SCALE_UPS * SCALE_DOWN_TAIL_MINUTES


def estimate_run(settings: RunSettings) -> Estimate:
    """The run's estimate for each capacity mode, the other settings as they are."""
    chips_per_host = CHIPS_PER_HOST.get(settings.compute_type, 0)
    chips = _chips(settings.topology) * settings.cluster_nodepool_count
    hosts = chips // chips_per_host if chips_per_host else 0
    phases = _phases(settings)
    modes = []
    for capacity in CAPACITY_MODES:
        hours = billed_minutes(phases, capacity) / 60
        price = prices.price(settings.tpu_type, capacity)
        modes.append(
            ModeEstimate(
                capacity=capacity,
                billed_hours=hours,
                chip_hours=chips * hours,
                host_hours=hosts * hours,
                usd=None if price is None else chips * hours * price.usd_per_chip_hour,
                price=price,
            )
        )
    return Estimate(
        tpu_type=settings.tpu_type,
        compute_type=settings.compute_type,
        slices=settings.cluster_nodepool_count,
        chips=chips,
        hosts=hosts,
        steps=settings.num_batches,
        capacity=str(settings.capacity),
        phases=phases,
        modes=tuple(modes),
        assumptions=_assumptions(settings),
    )


def _chips(topology: str) -> int:
    """Chips in one slice of `topology` ('4x8'); 0 when malformed."""
    try:
        a, b = (int(x) for x in topology.split("x"))
    except ValueError:
        return 0
    return a * b


def _assumptions(settings: RunSettings) -> tuple[str, ...]:
    lines = [
        f"step times are assumed, not measured: {_minutes_text()}, a GRPO step "
        f"{ASSUMED_STEP_SECONDS:g} s; a real run's are in its report",
        "waits for TPU capacity (flex-start, Kueue) and training resumes after lost capacity "
        "add time, not shown",
        "reservation and Spot: a static pool bills from the cluster's creation to its "
        "destruction (on an existing cluster: for the run's span); flex-start: only while "
        f"convert, training and export hold the slice, plus up to {SCALE_DOWN_TAIL_MINUTES:g} "
        "min of scale-down after each",
        "TPUs only: the cluster's CPU nodes, disks, network and storage are not counted",
        "where a mode's own v6e price is not public the on-demand price stands in for it "
        "(an upper bound)",
    ]
    if settings.cluster_mode == "create" and settings.keep_cluster:
        lines.append("keep_cluster: the pool keeps billing after the run, not counted here")
    return tuple(lines)


def _minutes_text() -> str:
    return ", ".join(f"{step} {minutes:g} min" for step, minutes in ASSUMED_MINUTES.items())


def format_estimate(estimate: Estimate) -> list[str]:
    """The estimate as lines for a terminal or a form: the slice, the time, each mode's
    chip-hours, host-hours and dollars, the prices' source and date, the assumptions."""
    e = estimate
    phases = ", ".join(f"{step} {minutes:.0f} min" for step, minutes in e.phases)
    lines = [
        f"Estimate for {e.slices} x {e.tpu_type} ({e.chips} chips on {e.hosts} hosts of "
        f"{e.compute_type}), {e.steps} training steps:",
        f"  time: about {e.wall_minutes / 60:.1f} h ({phases})",
    ]
    for mode in e.modes:
        own = " (chosen)" if mode.capacity == e.capacity else ""
        cost = "no price known" if mode.usd is None else f"${mode.usd:,.2f}"
        lines.append(
            f"  {mode.capacity}{own}: {mode.chip_hours:.2f} chip-hours = {mode.host_hours:.2f} "
            f"host-hours ({mode.billed_hours:.2f} h billed), {cost}{_price_text(mode.price)}"
        )
    priced = [m for m in e.modes if m.price]
    if priced:
        reads = ", ".join(sorted({m.price.read for m in priced}))
        sources = "; ".join(f"{m.capacity} {m.price.source}" for m in priced)
        lines.append(f"  prices (tpu_rl/report/prices.py, read {reads}): {sources}")
    lines += ["  assumptions:", *(f"  - {line}" for line in e.assumptions)]
    return lines


def _price_text(price: prices.Price | None) -> str:
    if price is None:
        return ""
    return f" at ${price.usd_per_chip_hour:.2f} per chip-hour ({price.basis})"


def estimate_paragraph(estimate: Estimate) -> str:
    """The estimate as one paragraph of plain text (the trigger form shows a Param's
    description as it is): each mode's chip-hours, host-hours and dollars, the prices' date,
    the assumptions in short."""
    e = estimate
    modes = "; ".join(
        f"{m.capacity} {m.chip_hours:.2f} chip-hours = {m.host_hours:.2f} host-hours, "
        + ("no price known" if m.usd is None else f"${m.usd:,.2f}")
        for m in e.modes
    )
    priced = [m.price for m in e.modes if m.price]
    price = (
        f" At ${priced[0].usd_per_chip_hour:.2f} per chip-hour, the on-demand list price "
        f"({prices.PRICING_PAGE}, read {priced[0].read}) where a mode's own is not public."
        if priced
        else ""
    )
    return (
        f"Estimate for these defaults ({e.slices} x {e.tpu_type}: {e.chips} chips on {e.hosts} "
        f"hosts of {e.compute_type}, {e.steps} steps, about {e.wall_minutes / 60:.1f} h): "
        f"{modes}.{price} Assumed, not measured: {_minutes_text()}, a GRPO step "
        f"{ASSUMED_STEP_SECONDS:g} s; TPUs only; waits for capacity not included. "
        "make plan gives it for your settings."
    )
