"""TPU slices: what a run's slices hold, per generation (tpu_rl.tpu.Slice), from the figures
the module's sources give: v6e-32 4x8 (8 hosts of 4 chips), v5p-64 2x4x4 (32 chips, 32 JAX
devices), tpu7x-128 4x4x4 (64 chips, 128 JAX devices: two per chip)."""

from __future__ import annotations

import pytest

from tpu_rl.tpu import GENERATIONS, Slice, hosts_per_slice


@pytest.mark.parametrize(
    ("tpu_type", "topology", "count", "facts"),
    [
        ("v6e-32", "4x8", 1, ("v6e-32", "ct6e-standard-4t", 32, 8, 32)),
        ("v6e-32", "4x8", 2, ("v6e-32", "ct6e-standard-4t", 64, 16, 64)),
        ("v5p-64", "2x4x4", 1, ("v5p-64", "ct5p-hightpu-4t", 32, 8, 32)),
        ("tpu7x-128", "4x4x4", 1, ("tpu7x-128", "tpu7x-standard-4t", 64, 16, 128)),
        ("tpu7x-128", "4x4x4", 3, ("tpu7x-128", "tpu7x-standard-4t", 192, 48, 384)),
    ],
)
def test_a_runs_slices_type_machine_chips_hosts_and_devices(tpu_type, topology, count, facts):
    s = Slice.of(tpu_type, topology, count)
    assert (s.tpu_type, s.machine_type, s.chips, s.hosts, s.devices) == facts


def test_one_slices_figures_do_not_count_the_other_slices():
    s = Slice.of("tpu7x-128", "4x4x4", 2)
    assert (s.chips_per_slice, s.hosts_per_slice, s.devices_per_slice) == (64, 16, 128)


@pytest.mark.parametrize("generation", GENERATIONS.values(), ids=GENERATIONS.keys())
@pytest.mark.parametrize("topology", ["2x2", "4x8", "2x2x4", "4x4x8"])
def test_hosts_per_slice_is_hosts_per_slice_of_the_machine_type(generation, topology):
    s = Slice(generation, topology)
    assert s.hosts_per_slice == hosts_per_slice(topology, generation.machine_type)


def test_a_single_host_slice_is_one_vm():
    assert Slice.of("v6e-4", "2x2").hosts == 1


def test_an_unknown_tpu_type_is_the_tutorials_generation():
    assert Slice.of("v9z-8", "2x4").generation is GENERATIONS["v6e"]
