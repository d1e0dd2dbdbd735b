"""The TPU capacity modes (tpu_rl.settings.choices.Capacity), each declared once: what the
Cluster Toolkit blueprint's TPU node pool renders, how the mode bills, which preflight check
applies, whether it takes the run's reservation, and whether its capacity ends on its own (and so
how the reward wait ends).

The blueprint: `reservation` and `calendar` keep the tutorial's static pool in its
SPECIFIC_RESERVATION as it is; `flex_start` and `spot` drop the reservation and add their pool
settings, as Cluster Toolkit's consumption-options examples do (tpu_rl.cluster.capacity cites
them and gcluster's static_node_count for Spot). Billing: tpu_rl.prices cites each
mode's. Preflight: tpu_rl.preflight.capacity cites the quotas each mode consumes. Ends: a
flex-start node lives at most its pool's max run duration and a calendar reservation's VMs are
deleted at its window's end (tpu_rl.watch.capacity_end cites both); Compute Engine may preempt a
Spot VM at any time (https://cloud.google.com/compute/docs/instances/spot).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Final, Literal

from tpu_rl.settings.choices import Capacity

# What bills: the mode's hours (usage), a commitment (a reservation), a window (calendar).
USAGE: Final = "usage"
COMMITMENT: Final = "commitment"
WINDOW: Final = "window"
BilledAs = Literal["usage", "commitment", "window"]
# The blueprint vars of the TPU pool's autoscaling bounds, as gke-node-pool names them.
MIN_NODES_VAR, MAX_NODES_VAR = "autoscaling_min_node_count", "autoscaling_max_node_count"
RESERVATION_VAR = "reservation"


class RunValue(StrEnum):
    """A blueprint var's value that is the run's own, filled in by tpu_rl.cluster.capacity."""

    RESERVATION = "the run's reservation"
    SLICE_HOSTS = "the hosts of one slice"


class Preflight(StrEnum):
    """The capacity check preflight makes of a mode (tpu_rl.preflight.capacity)."""

    RESERVATION = "the reservation's free VMs"
    CALENDAR_WINDOW = "the calendar reservation's window"
    PREEMPTIBLE_QUOTA = "the region's preemptible TPU quota"
    # Flex-start consumes on-demand quota where the project has no preemptible quota.
    PREEMPTIBLE_ELSE_ON_DEMAND_QUOTA = "the preemptible TPU quota, else the on-demand one"


class CapacityEnd(StrEnum):
    """How the mode's capacity ends on its own, and so how the reward wait ends."""

    # Held until the cluster is destroyed: training ends on its own (a node lost to maintenance
    # ends the wait as capacity_lost, and training resumes).
    NONE = "none"
    # Each node is labelled with its termination time: training stops at the last save before
    # it (capacity_ending) and resumes on new nodes.
    MAX_RUN_DURATION = "the node pool's max run duration"
    # The window's end is known before training starts: training stops at the last save before
    # it (capacity_ending) and resumes on the ladder's next rung, or the run fails.
    WINDOW_END = "the calendar window's end"
    # No end known in advance: a preemption ends the wait as capacity_lost, and training resumes
    # from the newest checkpoint.
    PREEMPTION = "preemption"


def _frozen(values: Mapping[str, object]) -> Mapping[str, object]:
    return MappingProxyType(dict(values))


@dataclass(frozen=True)
class CapacityMode:
    """One capacity mode: its TPU pool, its billing, its preflight check and how it ends."""

    capacity: Capacity
    title: str  # as tables write it
    takes_reservation: bool  # the TPU pool consumes the run's `reservation`
    # The pool's nodes exist from the deploy to the destroy (else only while pods need them).
    static_pool: bool
    billed_as: BilledAs
    price_column: str  # the column of tpu_rl.prices' table the mode bills at
    preflight: Preflight
    ends: CapacityEnd
    node_label: str = ""  # GKE's label on the mode's nodes, for TPU pods to select
    # The GKE NodeConfig field set on the mode's nodes (google-cloud-container 2.67.0,
    # container_v1/types/cluster_service.py, NodeConfig: `spot` line 1900, `flex_start` 1966).
    node_config_flag: str = ""
    # The blueprint's deployment vars the mode sets (a RunValue is the run's own).
    blueprint_vars: Mapping[str, object] = field(default_factory=lambda: _frozen({}))
    # The TPU pool's settings the mode adds (after tpu_rl.cluster.capacity.POOL_ANCHOR), reading
    # the blueprint vars of the same names, and those it removes.
    pool_settings: Mapping[str, object] = field(default_factory=lambda: _frozen({}))
    dropped_pool_settings: tuple[str, ...] = ()

    @property
    def static_without_reservation(self) -> bool:
        """The pool is static and no reservation holds its VMs: it gets them at the deploy or
        not at all, and it bills for the cluster's whole life."""
        return self.static_pool and not self.takes_reservation


_RESERVED_VARS = _frozen({RESERVATION_VAR: RunValue.RESERVATION})
CAPACITY_MODES: Mapping[str, CapacityMode] = MappingProxyType(
    {
        mode.capacity: mode
        for mode in (
            CapacityMode(
                Capacity.RESERVATION,
                "reservation",
                takes_reservation=True,
                static_pool=True,
                billed_as=COMMITMENT,
                price_column="commit_1y",
                preflight=Preflight.RESERVATION,
                ends=CapacityEnd.NONE,
                blueprint_vars=_RESERVED_VARS,
            ),
            CapacityMode(
                Capacity.CALENDAR,
                "calendar",
                takes_reservation=True,
                static_pool=True,
                billed_as=WINDOW,
                price_column="calendar",
                preflight=Preflight.CALENDAR_WINDOW,
                ends=CapacityEnd.WINDOW_END,
                blueprint_vars=_RESERVED_VARS,
            ),
            CapacityMode(
                Capacity.FLEX_START,
                "flex-start",
                takes_reservation=False,
                static_pool=False,
                billed_as=USAGE,
                price_column="flex_start",
                preflight=Preflight.PREEMPTIBLE_ELSE_ON_DEMAND_QUOTA,
                ends=CapacityEnd.MAX_RUN_DURATION,
                node_label="cloud.google.com/gke-flex-start",
                node_config_flag="flex_start",
                blueprint_vars=_frozen(
                    {
                        "enable_flex_start": True,
                        MIN_NODES_VAR: 0,
                        MAX_NODES_VAR: RunValue.SLICE_HOSTS,
                    }
                ),
                # as in the dws-flex-start/gke-tpu-v6e example (auto_repair false: "flex-start
                # dependency" there); gke-node-pool: "enable_flex_start does not work with
                # static_node_count"
                pool_settings=_frozen(
                    {
                        "enable_flex_start": "$(vars.enable_flex_start)",
                        "auto_repair": False,
                        MIN_NODES_VAR: f"$(vars.{MIN_NODES_VAR})",
                        MAX_NODES_VAR: f"$(vars.{MAX_NODES_VAR})",
                    }
                ),
                dropped_pool_settings=("reservation_affinity", "static_node_count"),
            ),
            CapacityMode(
                Capacity.SPOT,
                "spot",
                takes_reservation=False,
                static_pool=True,
                billed_as=USAGE,
                price_column="spot",
                preflight=Preflight.PREEMPTIBLE_QUOTA,
                ends=CapacityEnd.PREEMPTION,
                node_label="cloud.google.com/gke-spot",
                node_config_flag="spot",
                blueprint_vars=_frozen({"spot": True}),
                # no autoscaling settings: gcluster's static_node_count makes the module drop them
                pool_settings=_frozen({"spot": "$(vars.spot)"}),
                dropped_pool_settings=("reservation_affinity",),
            ),
        )
    }
)


def capacity_mode(capacity: str) -> CapacityMode:
    """The declaration of a capacity mode, by its name (a Capacity or its value)."""
    return CAPACITY_MODES[capacity]
