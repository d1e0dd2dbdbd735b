"""Chip-hours, host-hours and their cost for one run, with the rule and the price it used: the
computation `outcome` runs once (tpu_rl.report.run_cost) for the run report, the note and the RL
page (which runs it itself only for a run whose `outcome` did not count it).

Host-hours are TPU VM hosts x hours (a v6e-32 slice: 8 hosts of ct6e-standard-4t); chip-hours
are host-hours x chips per host (4), the unit of the price. The rule is the TPU nodes' life
(tpu_rl.report.tpu_nodes) whenever the run's steps looked at them. A run without looks (one
from before the looks, or whose looks all failed) is estimated from its task times by what bills
for its settings: a static pool (a reservation, or Spot: gcluster makes it static,
tpu_rl.cluster.capacity) for its whole life; a flex-start pool while its TPU steps ran. The cost
of Spot and flex-start is chip-hours x the mode's price in the run's region
(tpu_rl.prices; the run's negotiated_usd_per_chip_hour instead, when it sets one); a
reservation is paid by its commitment and a calendar window for its
whole length, whatever the run used: no spend of the run's own (`estimated_cost_usd` None), the
commitment or the window's price shown instead (`billed_as`, billed_text). The cluster's CPU
nodes, disks and network are not counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tpu_rl import prices
from tpu_rl.report.tpu_nodes import node_seconds
from tpu_rl.settings.capacity_modes import COMMITMENT, USAGE, WINDOW, capacity_mode
from tpu_rl.tpu import CHIPS_PER_HOST

if TYPE_CHECKING:
    from tpu_rl.report.tpu_nodes import Look
    from tpu_rl.settings.fields import RunSettings

NODE_LIFE = "tpu_node_life"
CREATED_POOL = "created_pool"
EXISTING_STATIC_POOL = "existing_static_pool"
TPU_NODES = "tpu_nodes"
RULES = {
    NODE_LIFE: "the run's TPU Node objects, each from its creationTimestamp to its deletion "
    "(the first look without it), within the run's span: the autoscaler's scale-down tail "
    "included, waits for capacity while no node existed excluded",
    CREATED_POOL: "no TPU node records; the run's cluster and its static TPU node pool "
    "(a reservation, or Spot: gcluster makes it static): from create_cluster's start to "
    "cleanup_cluster's end",
    EXISTING_STATIC_POOL: "no TPU node records; an existing cluster's static TPU node pool "
    "(reservation or Spot): the run's span",
    TPU_NODES: "no TPU node records; a TPU pool that scales from zero (flex-start, or an "
    "existing cluster without a reservation): the steps that hold its nodes (convert, "
    "start_backend to the end of the reward wait, export; their waits included)",
}


def task_time_rule(settings: RunSettings) -> str:
    """What bills when no node was seen: only flex-start (or an existing pool named without a
    reservation) scales from zero; a created cluster's other pools are static."""
    mode = capacity_mode(settings.capacity)
    if not mode.static_pool:
        return TPU_NODES
    if settings.cluster_mode == "create":
        return CREATED_POOL
    static = bool(settings.reservation) or mode.static_without_reservation
    return EXISTING_STATIC_POOL if static else TPU_NODES


def tpu_billing(
    settings: RunSettings,
    hosts: int,
    looks: list[Look],
    span: tuple[float, float],
    task_seconds: dict[str, float],
    until_text: str,
) -> dict[str, Any]:
    """Host-hours, chip-hours, cost, rule and price of a run. `span`: epoch seconds the run
    started and the count ends (`until_text` says what that end is); `task_seconds`: the
    pool's seconds under each task-time rule, for a run without looks."""
    if looks:
        rule = NODE_LIFE
        host_seconds = node_seconds(looks, *span)
    else:
        rule = task_time_rule(settings)
        host_seconds = hosts * task_seconds.get(rule, 0.0)
    host_hours = host_seconds / 3600
    chips_per_host = CHIPS_PER_HOST[settings.compute_type]
    region = settings.zone or settings.region
    price = prices.capacity_price(
        settings.tpu_type, region, settings.capacity, settings.negotiated_usd_per_chip_hour
    )
    chip_hours = host_hours * chips_per_host
    billed_as = capacity_mode(settings.capacity).billed_as
    spends = billed_as == USAGE  # a commitment or a window is no spend of the run's own
    spent = chip_hours * price.usd_per_chip_hour if price is not None and spends else None
    return {
        "hosts": hosts,
        "pool_seconds": host_seconds / hosts if hosts else 0.0,
        "host_hours": host_hours,
        "chip_hours": chip_hours,
        "rule": rule,
        "rule_text": f"{RULES[rule]}; counted to {until_text}",
        "nodes_seen": len({n for x in looks for n in x["nodes"]}),
        "estimated_cost_usd": spent,
        "billed_as": billed_as,
        "pool_chips": hosts * chips_per_host,
        "price": None if price is None else {**price.as_dict(), "capacity": settings.capacity},
    }


def billed_text(tpu: Mapping[str, Any]) -> str | None:
    """What a reservation or a calendar window costs instead of the run's hours, in words;
    None for Spot and flex-start (their hours are the spend) or without a price."""
    price, billed_as = tpu.get("price"), tpu.get("billed_as")
    if not price or billed_as not in (COMMITMENT, WINDOW):
        return None
    rate = f"${price['usd_per_chip_hour']:g} per chip-hour ({price['basis']}, {price['region']})"
    if billed_as == COMMITMENT:
        return (
            f"no spend of this run's own: the reservation is paid by its commitment, whether or "
            f"not the pool exists (1-year commitment {rate}; {prices.CONSUMPTION_PAGE})"
        )
    day = tpu["pool_chips"] * prices.MIN_WINDOW_HOURS * price["usd_per_chip_hour"]
    return (
        f"no spend of this run's own: the calendar window bills its whole length, used or not, "
        f"at {rate}: ${day:,.2f} a day for {tpu['pool_chips']} chips, at least one day "
        f"({prices.CALENDAR_PAGE})"
    )
