"""The capacity modes' table: each row states what its users render, bill, check and wait for,
so a wrong row fails here by the mode's name."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import TUTORIAL_CONF
from tpu_rl import prices
from tpu_rl.cluster import capacity
from tpu_rl.janitor.rules import capacity_of
from tpu_rl.report import billing, estimate
from tpu_rl.settings.capacity_modes import (
    CAPACITY_MODES,
    COMMITMENT,
    USAGE,
    WINDOW,
    CapacityEnd,
    Preflight,
    capacity_mode,
)
from tpu_rl.settings.choices import Capacity
from tpu_rl.settings.fields import RunSettings
from tpu_rl.settings.run_settings import load_settings

MODES = [str(c) for c in Capacity]


def settings_for(mode: str, **more: Any) -> RunSettings:
    """The tutorial's run (v6e-32: 8 hosts a slice) on `mode`."""
    conf = json.loads(TUTORIAL_CONF.read_text())
    if not capacity_mode(mode).takes_reservation:
        conf["reservation"] = ""
    return load_settings({**conf, "capacity": mode, **more})


def test_every_capacity_has_one_row_in_the_enums_order():
    assert list(CAPACITY_MODES) == list(Capacity)
    assert all(mode.capacity is c for c, mode in CAPACITY_MODES.items())


def test_a_mode_is_found_by_its_plain_name_as_a_ladder_rung_gives_it():
    assert capacity_mode("flex_start") is CAPACITY_MODES[Capacity.FLEX_START]


@pytest.mark.parametrize(
    ("mode", "row"),
    [
        ("reservation", (True, True, "commitment", "commit_1y", Preflight.RESERVATION)),
        ("calendar", (True, True, "window", "calendar", Preflight.CALENDAR_WINDOW)),
        (
            "flex_start",
            (False, False, "usage", "flex_start", Preflight.PREEMPTIBLE_ELSE_ON_DEMAND_QUOTA),
        ),
        ("spot", (False, True, "usage", "spot", Preflight.PREEMPTIBLE_QUOTA)),
    ],
)
def test_reservation_pool_billing_and_preflight_per_mode(mode, row):
    m = capacity_mode(mode)
    assert (m.takes_reservation, m.static_pool, m.billed_as, m.price_column, m.preflight) == row


@pytest.mark.parametrize(
    ("mode", "end"),
    [
        ("reservation", CapacityEnd.NONE),
        ("calendar", CapacityEnd.WINDOW_END),
        ("flex_start", CapacityEnd.MAX_RUN_DURATION),
        ("spot", CapacityEnd.PREEMPTION),
    ],
)
def test_how_each_modes_capacity_ends(mode, end):
    assert capacity_mode(mode).ends is end


@pytest.mark.parametrize(
    ("mode", "deployment_vars"),
    [
        ("reservation", {"reservation": "v6e-32-reservation"}),
        ("calendar", {"reservation": "v6e-32-reservation"}),
        (
            "flex_start",
            {
                "enable_flex_start": True,
                "autoscaling_min_node_count": 0,
                "autoscaling_max_node_count": 8,
            },
        ),
        ("spot", {"spot": True}),
    ],
)
def test_the_blueprint_vars_each_mode_sets(mode, deployment_vars):
    assert capacity.capacity_vars(settings_for(mode)) == deployment_vars


TUTORIAL_POOL = {
    "machine_type": "ct6e-standard-4t",
    "disk_size_gb": 100,
    "reservation_affinity": {"consume_reservation_type": "SPECIFIC_RESERVATION"},
    "static_node_count": 8,
}


@pytest.mark.parametrize(
    ("mode", "pool_keys"),
    [
        (
            "flex_start",
            [
                "machine_type",
                "disk_size_gb",
                "enable_flex_start",
                "auto_repair",
                "autoscaling_min_node_count",
                "autoscaling_max_node_count",
            ],
        ),
        ("spot", ["machine_type", "disk_size_gb", "spot", "static_node_count"]),
    ],
)
def test_the_tpu_pool_keys_each_unreserved_mode_renders(mode, pool_keys):
    assert list(capacity.edit_pool(dict(TUTORIAL_POOL), settings_for(mode))) == pool_keys


@pytest.mark.parametrize("mode", ["reservation", "calendar"])
def test_a_reserved_mode_leaves_the_tutorials_pool(mode):
    m = capacity_mode(mode)
    assert (dict(m.pool_settings), m.dropped_pool_settings) == ({}, ())
    assert describe_first(mode).startswith("none: the tutorial's static TPU pool")


def describe_first(mode: str) -> str:
    return capacity.describe_edits(settings_for(mode))[0]


def test_only_the_calendar_pool_is_described_in_its_window():
    assert describe_first("calendar").endswith("in its calendar window")
    assert not describe_first("reservation").endswith("in its calendar window")


@pytest.mark.parametrize(
    ("mode", "selector"),
    [
        ("reservation", {}),
        ("calendar", {}),
        ("flex_start", {"cloud.google.com/gke-flex-start": "true"}),
        ("spot", {"cloud.google.com/gke-spot": "true"}),
    ],
)
def test_the_node_label_tpu_pods_select_per_mode(mode, selector):
    assert capacity.node_selector(settings_for(mode)) == selector


@pytest.mark.parametrize(
    ("flags", "mode"),
    [
        ({"flex_start": True, "spot": False}, "flex_start"),
        ({"flex_start": False, "spot": True}, "spot"),
        ({"flex_start": False, "spot": False}, "reservation"),
    ],
)
def test_the_janitor_reads_a_pools_mode_from_its_node_config_flags(flags, mode):
    found = capacity_of(SimpleNamespace(**flags))
    assert (found, type(found)) == (mode, str)


@pytest.mark.parametrize(
    ("mode", "billed_as", "price_mode"),
    [
        ("reservation", COMMITMENT, prices.COMMIT_1Y),
        ("calendar", WINDOW, prices.CALENDAR),
        ("flex_start", USAGE, prices.FLEX_START),
        ("spot", USAGE, prices.SPOT),
    ],
)
def test_billed_as_and_price_column_per_mode(mode, billed_as, price_mode):
    assert capacity_mode(mode).billed_as == billed_as
    assert prices.price_mode(mode) == price_mode
    assert capacity_mode(mode).price_column in prices.PRICE_MODES


@pytest.mark.parametrize(
    ("mode", "billed_minutes"),
    [("reservation", 100.0), ("calendar", 100.0), ("spot", 100.0), ("flex_start", 80.0)],
)
def test_a_static_pool_bills_the_whole_run_a_flex_start_pool_its_tpu_steps(mode, billed_minutes):
    phases = (("create_cluster", 30.0), ("train", 50.0), ("destroy_cluster", 20.0))
    # flex-start: train's 50 minutes and three scale-down tails of 10 minutes
    assert estimate.billed_minutes(phases, mode) == billed_minutes


@pytest.mark.parametrize(
    ("mode", "reservation", "rule"),
    [
        ("reservation", "r", billing.EXISTING_STATIC_POOL),
        ("reservation", "", billing.TPU_NODES),
        ("calendar", "r", billing.EXISTING_STATIC_POOL),
        ("spot", "", billing.EXISTING_STATIC_POOL),
        ("flex_start", "", billing.TPU_NODES),
    ],
)
def test_what_bills_on_an_existing_cluster_without_node_records(mode, reservation, rule):
    s = SimpleNamespace(capacity=mode, cluster_mode="existing", reservation=reservation)
    assert billing.task_time_rule(s) == rule


@pytest.mark.parametrize("mode", MODES)
def test_a_stockout_fails_the_deploy_of_a_spot_pool_only(mode):
    said = capacity.deploy_stockout(settings_for(mode), "ZONE_RESOURCE_POOL_EXHAUSTED")
    assert (said is not None) == (mode == "spot")
    assert capacity.scales_from_zero(settings_for(mode)) == (mode == "flex_start")
