"""tpu_rl.settings.device_mesh: a slice's devices in libtpu's order, the box a role's devices
fill, and whether JAX can lay a mesh's axes on it (MaxText's own judgement of the same meshes:
the maxtext tier, tests/maxtext)."""

from __future__ import annotations

import pytest

from tpu_rl.settings.device_mesh import HOLE, mesh_problem, physical_box, slice_devices

V6E_32 = slice_devices((4, 8), 1)


def test_devices_go_host_by_host_x_fastest_and_a_chips_cores_last():
    assert len(V6E_32) == 32 and len(set(V6E_32)) == 32
    assert V6E_32[:6] == [
        (0, 0, 0, 0),
        (1, 0, 0, 0),
        (0, 1, 0, 0),
        (1, 1, 0, 0),  # the first host's 2x2 chips
        (2, 0, 0, 0),
        (3, 0, 0, 0),
    ]
    two_cores = slice_devices((2, 2, 2), 2)
    assert two_cores[:3] == [(0, 0, 0, 0), (0, 0, 0, 1), (1, 0, 0, 0)]


def test_the_box_is_the_devices_spans_or_none_when_they_leave_a_hole():
    assert physical_box(V6E_32, four_d=False) == (4, 8, 1)
    assert physical_box(slice_devices((2, 2, 2), 2), four_d=True) == (2, 2, 2, 2)
    assert physical_box(V6E_32[:28], four_d=False) is None
    assert physical_box(V6E_32[:4] + V6E_32[:4], four_d=False) is None  # a device twice


@pytest.mark.parametrize(
    "axes",
    [[("fsdp", 32)], [("fsdp", 8), ("tensor", 4)], [("fsdp", 4), ("tensor", 8)]],
)
def test_axes_that_are_products_of_whole_physical_axes_are_laid(axes):
    assert mesh_problem("v6e", V6E_32, axes, allow_split=False) is None


def test_an_axis_no_whole_physical_axis_makes_needs_them_split():
    axes = [("fsdp", 16), ("tensor", 2)]
    assert mesh_problem("v6e", V6E_32, axes, allow_split=False) == (
        "the tensor axis (2) is no product of whole physical axes of the 4x8x1 box they fill, "
        "the others' axes taken first (JAX: 'Failed to find assignment')"
    )
    assert mesh_problem("v6e", V6E_32, axes, allow_split=True) is None


def test_devices_that_fill_no_box_cannot_hold_a_mesh_and_the_kinds_own_layouts_can():
    assert mesh_problem("v6e", V6E_32[:28], [("fsdp", 28)], allow_split=True) == HOLE
    assert mesh_problem("v6e", V6E_32[:8], [("fsdp", 2), ("tensor", 4)], allow_split=False) is None
