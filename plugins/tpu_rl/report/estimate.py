"""A run's cost and time before it runs: chip-hours, host-hours and dollars per region and
capacity mode.

The time is the run's steps at assumed durations (ASSUMED_MINUTES, and a GRPO step's time from
step_seconds: no public step time of any cell was found, so it is the tutorial's assumed 60 s
scaled by the model's parameters per chip-TFLOP of a slice; not measured, a real run's
step durations are in its report). What bills follows the rules of
tpu_rl.report.billing: a static pool (reservation, calendar or Spot; gcluster makes a Spot pool
static) exists from the cluster's creation to its destruction, or for the run's span on an
existing cluster; a flex-start pool only while the TPU steps hold it, plus the autoscaler's
scale-down tail after each. Dollars come from the price table (tpu_rl.prices: each
price's region, source and date): Spot and flex-start bill their hours; a calendar window bills
its whole length, at least one day and as many whole days as the run takes; a reservation is
paid by its commitment, shown as the commitment's price, not as a spend of the run. The regions
are the run's zone's and, with a capacity ladder, each rung's. Pure arithmetic on the settings:
the DAG's parse computes the form's estimate.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tpu_rl import prices
from tpu_rl.catalogue.cells import TUTORIAL_CELL
from tpu_rl.catalogue.models import MODELS
from tpu_rl.cluster.ladder import cross_zone_text
from tpu_rl.settings.capacity_modes import (
    CAPACITY_MODES,
    COMMITMENT,
    USAGE,
    WINDOW,
    BilledAs,
    capacity_mode,
)
from tpu_rl.settings.rungs import LadderError, parse_ladder
from tpu_rl.tpu import CHIPS_PER_HOST, Slice, chips_in

if TYPE_CHECKING:
    from tpu_rl.settings.fields import RunSettings

TUTORIAL_REGION = "us-east5"  # include/examples/tutorial.json's
# Assumed minutes per step; none is measured by this repository.
ASSUMED_MINUTES = {
    "create_cluster": 30.0,  # gcluster deploy: network, GKE cluster, CPU and TPU node pools
    "convert": 30.0,  # the Hugging Face -> MaxText conversion (skipped when done before)
    "start_backend": 5.0,  # the Pathways backend's pods up
    "export": 20.0,  # MaxText -> Hugging Face export
    "destroy_cluster": 10.0,  # gcluster destroy
}
# One model on the held-out benchmarks: vLLM loads the MaxText checkpoint on the slice, then
# answers them (maxtext.eval; assumed: MaxText 0.2.4's eval README publishes no duration)
HELDOUT_MODEL_MINUTES = 15.0
ASSUMED_STEP_SECONDS = 60.0  # one GRPO training step of the tutorial's cell (num_batches steps)
# Peak BF16 TFLOPs per chip, Google's table of v5p, v6e and TPU7x
# (https://docs.cloud.google.com/tpu/docs/tpu7x, "System architecture", read 2026-12-06).
PEAK_BF16_TFLOPS = {"v5p": 459.0, "v6e": 918.0, "tpu7x": 2307.0}
STEP_RULE = (
    "assumed: no public step time was found (MaxText's RL tutorials at maxtext-v0.2.4 name the "
    "step_time_sec metric, no figure); the tutorial's assumed 60 s a step scaled by the model's "
    "parameters (billions, as its Hugging Face name states) per chip-TFLOP of a slice (peak "
    "BF16: v5p 459, v6e 918, TPU7x 2307, docs.cloud.google.com/tpu/docs/tpu7x)"
)
# GKE's autoscaler removes an idle flex-start node 1-10 minutes after its pods end (Cluster
# Toolkit's flex-start example, sandbox/vendor/cluster-toolkit/consumption-options/
# dws-flex-start__gke-tpu-v6e__README.md: "Automatic Removal"): the upper bound, after each of
# the three steps that hold the slice.
SCALE_DOWN_TAIL_MINUTES = 10.0
FLEX_START_SCALE_UPS = 3  # convert, the backend (training), export
# The settings estimate_run's figures are computed from: while one of them is invalid, the
# figures would be another run's (the estimate page withholds them). The others it reads,
# PLACE_SETTINGS, only choose the regions priced (run_regions): an empty one stands for the
# tutorial's region, shown in the table's summary, and a region without prices reads "no price
# known".
FIGURE_SETTINGS = frozenset(
    {
        "tpu_type",
        "compute_type",
        "topology",
        "cluster_nodepool_count",
        "num_batches",
        "cluster_mode",
        "keep_cluster",
        "capacity",
        "model_name",
        "negotiated_usd_per_chip_hour",
        "heldout_tasks",
        "heldout_top_k",
    }
)
PLACE_SETTINGS = frozenset({"region", "zone", "capacity_ladder"})


@dataclass(frozen=True)
class ModeEstimate:
    """What one capacity mode bills for the run in one region."""

    capacity: str
    billed_hours: float  # hours the TPU pool exists
    chip_hours: float
    host_hours: float
    usd: float | None  # the run's spend; None: a reservation's commitment, or no price known
    price: prices.Price | None
    region: str = ""
    billed_as: BilledAs = USAGE  # usage, commitment (a reservation), window (calendar)
    commitment: tuple[prices.Price | None, ...] = ()  # a reservation's 1- and 3-year prices
    chips: int = 0


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
    modes: tuple[ModeEstimate, ...]  # per region (the run's first), per capacity mode
    assumptions: tuple[str, ...]
    region: str = ""  # the run's zone's region
    run_regions: tuple[str, ...] = ()  # the run's and its ladder's; the others: comparison
    step_seconds: float = ASSUMED_STEP_SECONDS  # a GRPO step's, assumed (step_seconds)

    @property
    def wall_minutes(self) -> float:
        """The run's duration, waits for capacity not included."""
        return sum(minutes for _, minutes in self.phases)


def step_seconds(model_name: str, tpu_type: str, chips: int) -> float:
    """A GRPO step's assumed seconds for `model_name` on `chips` chips of `tpu_type` (STEP_RULE);
    ASSUMED_STEP_SECONDS for a model or generation the rule has no figure of."""
    model = MODELS.get(model_name)
    peak = PEAK_BF16_TFLOPS.get(prices.generation(tpu_type))
    if model is None or peak is None or chips <= 0:
        return ASSUMED_STEP_SECONDS
    tutorial = TUTORIAL_CELL.model.params_b / (
        chips_in(TUTORIAL_CELL.topology)
        * PEAK_BF16_TFLOPS[prices.generation(TUTORIAL_CELL.tpu_type)]
    )
    return ASSUMED_STEP_SECONDS * model.params_b / (chips * peak) / tutorial


def run_step_seconds(settings: RunSettings) -> float:
    """The run's assumed seconds a GRPO step: its model on one slice's chips (its cell's; more
    slices are not assumed faster)."""
    return step_seconds(settings.model_name, settings.tpu_type, chips_in(settings.topology))


def _phases(settings: RunSettings) -> tuple[tuple[str, float], ...]:
    """The run's steps with their assumed minutes: training is num_batches x the step time."""
    created = settings.cluster_mode == "create"
    destroyed = created and not settings.keep_cluster
    training = settings.num_batches * run_step_seconds(settings) / 60
    phases = [
        ("create_cluster", ASSUMED_MINUTES["create_cluster"] if created else 0.0),
        ("convert", ASSUMED_MINUTES["convert"]),
        ("start_backend", ASSUMED_MINUTES["start_backend"]),
        ("train", training),
        ("evaluate_heldout", heldout_minutes(settings)),
        ("export", ASSUMED_MINUTES["export"]),
        ("destroy_cluster", ASSUMED_MINUTES["destroy_cluster"] if destroyed else 0.0),
    ]
    return tuple((step, minutes) for step, minutes in phases if minutes)


def heldout_minutes(settings: RunSettings) -> float:
    """The held-out evaluation's assumed minutes: its steps, the base model and a champion
    (a deployment's first run has none: an upper bound); 0 when it is off."""
    if not settings.heldout_tasks:
        return 0.0
    return (settings.heldout_top_k + 2) * HELDOUT_MODEL_MINUTES


def billed_minutes(phases: tuple[tuple[str, float], ...], capacity: str) -> float:
    """Minutes the TPU pool bills: a static pool the whole run (the cluster's life, or the run's
    span on an existing cluster), a flex-start pool its TPU steps plus their scale-down tails."""
    if capacity_mode(capacity).static_pool:
        return sum(minutes for _, minutes in phases)
    held = sum(m for step, m in phases if step not in ("create_cluster", "destroy_cluster"))
    return held + FLEX_START_SCALE_UPS * SCALE_DOWN_TAIL_MINUTES


def run_regions(settings: RunSettings) -> list[str]:
    """The regions the run's TPUs may come from: its zone's (its region's, or the tutorial's
    without either: the form's defaults), then each ladder rung's."""
    zones = [settings.zone or settings.region or TUTORIAL_REGION]
    with contextlib.suppress(LadderError):  # validation says so; the run's own zone stays
        zones += [rung.zone for rung in parse_ladder(settings.capacity_ladder)]
    return list(dict.fromkeys(prices.region_of(zone) for zone in zones))


def window_hours(billed_hours: float) -> float:
    """Hours a calendar window for the run bills: whole days, at least one."""
    days = max(1, math.ceil(billed_hours / prices.MIN_WINDOW_HOURS - 1e-9))
    return days * prices.MIN_WINDOW_HOURS


def mode_estimate(
    settings: RunSettings,
    phases: tuple[tuple[str, float], ...],
    capacity: str,
    region: str,
    chips: int,
    hosts: int,
) -> ModeEstimate:
    """What `capacity` in `region` bills for the run: the run's own mode at its negotiated
    price when it has one (negotiated_usd_per_chip_hour), the others at the table's."""
    hours = billed_minutes(phases, capacity) / 60
    own = capacity == settings.capacity
    negotiated = settings.negotiated_usd_per_chip_hour if own else 0.0
    price = prices.capacity_price(settings.tpu_type, region, capacity, negotiated)
    billed_as = capacity_mode(capacity).billed_as
    if price is None or billed_as == COMMITMENT:
        usd = None
    elif billed_as == WINDOW:
        usd = chips * window_hours(hours) * price.usd_per_chip_hour
    else:
        usd = chips * hours * price.usd_per_chip_hour
    if billed_as != COMMITMENT:
        commitment: tuple[prices.Price | None, ...] = ()
    elif negotiated > 0:
        commitment = (price,)
    else:
        commitment = tuple(prices.commitment_prices(settings.tpu_type, region).values())
    return ModeEstimate(
        capacity=capacity,
        billed_hours=hours,
        chip_hours=chips * hours,
        host_hours=hosts * hours,
        usd=usd,
        price=price,
        region=region,
        billed_as=billed_as,
        commitment=commitment,
        chips=chips,
    )


def estimate_run(settings: RunSettings) -> Estimate:
    """The run's estimate for each capacity mode in each of its regions, the other settings as
    they are."""
    slices = Slice.of(settings.tpu_type, settings.topology, settings.cluster_nodepool_count)
    chips = slices.chips
    # hosts of the run's compute_type: none for an unknown one (the form's estimate reads any)
    hosts = slices.hosts if settings.compute_type in CHIPS_PER_HOST else 0
    phases = _phases(settings)
    regions = run_regions(settings)
    # the table's other regions, for comparison
    regions += [r for r in prices.regions(settings.tpu_type) if r not in regions]
    modes = [
        mode_estimate(settings, phases, capacity, region, chips, hosts)
        for region in regions
        for capacity in map(str, CAPACITY_MODES)
    ]
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
        region=regions[0],
        run_regions=tuple(run_regions(settings)),
        step_seconds=run_step_seconds(settings),
    )


def cross_zone_rungs(settings: RunSettings) -> list[tuple[str, str, str]]:
    """The ladder's rungs in another zone than the first (the cluster's, where the Pathways head
    runs on cpu-np), as (rung, the cluster's zone, the rung's zone): their TPU workers and the
    head talk across zones."""
    try:
        ladder = parse_ladder(settings.capacity_ladder)
    except LadderError:  # validate names it
        return []
    return [(str(r), ladder[0].zone, r.zone) for r in ladder[1:] if r.zone != ladder[0].zone]


def _assumptions(settings: RunSettings) -> tuple[str, ...]:
    lines = [
        f"step times are assumed, not measured: {_minutes_text()}, a GRPO step "
        f"{run_step_seconds(settings):.0f} s ({STEP_RULE}); a real run's are in its report",
        "waits for TPU capacity (flex-start, Kueue) and training resumes after lost capacity "
        "add time, not shown",
        "reservation, calendar and Spot: a static pool exists from the cluster's creation to "
        "its destruction (on an existing cluster: for the run's span); flex-start: only while "
        f"convert, training and export hold the slice, plus up to {SCALE_DOWN_TAIL_MINUTES:g} "
        "min of scale-down after each",
        "TPUs only: the cluster's CPU nodes, disks, network and storage are not counted",
        "where a mode's own price in a region is not in the table the region's on-demand price "
        "stands in for it (an upper bound: flex-start is discounted up to 53%)",
        "reservation: paid by its commitment whether or not the pool exists (no spend of the "
        "run's own); calendar: the window bills its whole length, at least one day",
    ]
    if settings.heldout_tasks:
        lines.append(
            f"held-out evaluation: {HELDOUT_MODEL_MINUTES:g} min a model assumed, "
            f"{settings.heldout_top_k} step(s), the base model and the champion, on the slice"
        )
    if settings.cluster_mode == "create" and settings.keep_cluster:
        lines.append("keep_cluster: the pool keeps billing after the run, not counted here")
    if why := prices.no_price_why(settings.tpu_type):
        lines.append(f"no price known: {why}")
    if settings.negotiated_usd_per_chip_hour > 0:
        lines.append(
            f"{settings.capacity}: the run's negotiated price, "
            f"${settings.negotiated_usd_per_chip_hour:g} per chip-hour, instead of the table's"
        )
    lines += [
        f"capacity ladder rung {rung}: {cross_zone_text(cluster_zone, rung_zone)}"
        for rung, cluster_zone, rung_zone in cross_zone_rungs(settings)
    ]
    return tuple(lines)


def _minutes_text() -> str:
    return ", ".join(f"{step} {minutes:g} min" for step, minutes in ASSUMED_MINUTES.items())


def mode_in(estimate: Estimate, capacity: str, zone_or_region: str) -> ModeEstimate | None:
    """The estimate of `capacity` in the region of `zone_or_region` (a ladder rung's zone)."""
    region = prices.region_of(zone_or_region)
    return next((m for m in estimate.modes if (m.capacity, m.region) == (capacity, region)), None)


def estimate_rows(estimate: Estimate) -> list[dict[str, object]]:
    """The estimate as data (plan.json): one row per region and capacity mode, with its hours,
    its spend (None: a reservation's commitment), what bills and the price used."""
    return [
        {
            "region": m.region,
            "capacity": m.capacity,
            "chosen": (m.capacity, m.region) == (estimate.capacity, estimate.region),
            "billed_hours": m.billed_hours,
            "chip_hours": m.chip_hours,
            "host_hours": m.host_hours,
            "usd": m.usd,
            "billed_as": m.billed_as,
            "cost": cost_words(m),
            "price": None if m.price is None else m.price.as_dict(),
            "commitment": [p.as_dict() for p in m.commitment if p is not None],
        }
        for m in estimate.modes
    ]


def format_estimate(estimate: Estimate) -> list[str]:
    """The estimate as lines for a terminal: the slice, the time, per region each mode's
    chip-hours, host-hours and cost, the price table's rows used (source and date), the
    assumptions."""
    e = estimate
    phases = ", ".join(f"{step} {minutes:.0f} min" for step, minutes in e.phases)
    lines = [
        f"Estimate for {e.slices} x {e.tpu_type} ({e.chips} chips on {e.hosts} hosts of "
        f"{e.compute_type}), {e.steps} training steps:",
        f"  time: about {e.wall_minutes / 60:.1f} h ({phases})",
    ]
    for region in dict.fromkeys(m.region for m in e.modes):
        why = "the run's" if region in e.run_regions else "another region, for comparison"
        lines.append(f"  in {region} ({why}):")
        for mode in (m for m in e.modes if m.region == region):
            own = " (chosen)" if (mode.capacity, region) == (e.capacity, e.region) else ""
            lines.append(
                f"    {mode.capacity}{own}: {mode.chip_hours:.2f} chip-hours = "
                f"{mode.host_hours:.2f} host-hours ({mode.billed_hours:.2f} h billed), "
                f"{cost_words(mode)}"
            )
    on_demand = [prices.listed(e.tpu_type, m.region, prices.ON_DEMAND) for m in e.modes]
    used = {
        (p.region, p.mode): p
        for p in (*on_demand, *(x for m in e.modes for x in (m.price, *m.commitment)))
        if p is not None
    }
    if used:
        lines.append("  prices (tpu_rl/prices.py), USD per chip-hour:")
        lines += [
            f"  - {region} {mode}: {p.usd_per_chip_hour:g} ({p.basis}{p.range_text}; {p.source}"
            + (f"; read {p.read})" if p.read else ")")
            for (region, mode), p in sorted(used.items())
        ]
    lines += ["  assumptions:", *(f"  - {line}" for line in e.assumptions)]
    return lines


def cost_words(mode: ModeEstimate) -> str:
    """A mode's cost in a few words: its spend at its price, a calendar window's cost, or a
    reservation's commitment."""
    if mode.price is None:
        return "no price known"
    rate = f"${mode.price.usd_per_chip_hour:g} per chip-hour ({mode.price.basis})"
    if mode.billed_as == COMMITMENT:
        rates = ", ".join(
            f"{p.mode.removeprefix('commit_')} ${p.usd_per_chip_hour:g} ({p.basis})"
            for p in mode.commitment
            if p is not None
        )
        day = mode.chips * prices.MIN_WINDOW_HOURS * mode.price.usd_per_chip_hour
        return (
            f"no spend of the run's own: the reservation's commitment, paid whether or not the "
            f"pool exists (per committed chip-hour: {rates}; {mode.chips} chips at 1-year: "
            f"${day:,.2f} a day)"
        )
    if mode.billed_as == WINDOW:
        hours = window_hours(mode.billed_hours)
        return (
            f"${mode.usd:,.2f}: a {hours / 24:.0f}-day window at {rate}, billed whole "
            "(at least one day)"
        )
    bound = "at most " if mode.price.basis == prices.UPPER_BOUND else ""
    return f"{bound}${mode.usd:,.2f} at {rate}"


TABLE_COLUMNS = ("capacity", "TPUs billed", "chip-hours", "cost")


@dataclass(frozen=True)
class ShortTable:
    """The estimate's short table, as the form and the estimate page show it: the slice, steps,
    region and time; one row per capacity mode in the run's region (TABLE_COLUMNS); what ten
    more training steps add and where the prices and the assumptions are."""

    summary: str
    rows: tuple[tuple[str, str, str, str], ...]
    note: str


def short_table(estimate: Estimate) -> ShortTable:
    """The estimate's short table (ShortTable), its figures as text."""
    e = estimate
    more_minutes = 10 * e.step_seconds / 60
    more_chip_hours = e.chips * more_minutes / 60
    return ShortTable(
        summary=f"{e.slices} x {e.tpu_type}, {e.chips} chips in all; {e.steps} steps; "
        f"{e.region}; about {e.wall_minutes / 60:.1f} h",
        rows=tuple(
            (m.capacity, f"{m.billed_hours:.1f} h", f"{m.chip_hours:.1f}", _short_cost(m))
            for m in e.modes
            if m.region == e.region
        ),
        note=f"Each 10 more steps: +{more_minutes:.0f} min, +{more_chip_hours:.1f} chip-hours. "
        f"Step times assumed (a GRPO step {e.step_seconds:.0f} s), TPUs only, no waits for "
        f"capacity; prices read {prices.TABLE_DATE} (tpu_rl/prices.py).",
    )


def estimate_table(estimate: Estimate, whose: str) -> str:
    """The estimate's short table (short_table) in Markdown; `whose` names the settings ("the
    defaults")."""
    table = short_table(estimate)
    rows = "\n".join(f"| {' | '.join(row)} |" for row in table.rows)
    return (
        f"**Estimate for {whose}** ({table.summary}):\n\n"
        f"| {' | '.join(TABLE_COLUMNS)} |\n|{'---|' * len(TABLE_COLUMNS)}\n{rows}\n\n"
        f"{table.note}"
    )


def _short_cost(mode: ModeEstimate) -> str:
    if mode.price is None:
        return "no price known"
    if mode.billed_as == COMMITMENT:
        return f"the reservation's commitment (1 year: ${mode.price.usd_per_chip_hour:g}/chip-hour)"
    if mode.billed_as == WINDOW:
        return f"${mode.usd:,.2f}: a whole-day window ({mode.price.basis})"
    bound = "at most " if mode.price.basis == prices.UPPER_BOUND else ""
    return f"{bound}${mode.usd:,.2f}"
