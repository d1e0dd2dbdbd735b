"""JAX's device mesh on a share of one TPU slice, as MaxText lays a role's mesh axes on its
devices: which devices a role gets, the physical box they form, and whether JAX can map the
mesh's axes onto that box.

MaxText (maxtext-v0.2.4 src/maxtext/utils/maxtext_utils.py:2248-2272, create_device_mesh with
one slice) calls jax.experimental.mesh_utils.create_device_mesh with the role's devices and its
ICI axes, `allow_split_physical_axes` as the run sets it. Ported from jax 0.12.1
jax/_src/mesh_utils.py, the version the MaxText judge tier runs (tools/maxtext_judge): the
device kinds' own layouts (116-250: v6e's and v5e's rings for 4, 8 and some 16 devices, v5p's
2x2x2, TPU7x's rings of up to 32 devices on 2x2 chips), the physical box of the devices
(_get_physical_tpu_mesh, 693-774: an AssertionError at 725-727 when they fill none), then the
axes' assignment to the box's axes from the most network-intensive (the last) on: whole
physical axes only (_create_device_mesh_for_nd_torus, 252-403: a NotImplementedError when an
axis is no product of some remaining physical axes) or, with `allow_split_physical_axes`,
splitting them by prime factors (_create_device_mesh_for_nd_torus_splitting_axes and its
helpers, 406-636).

The devices' order is libtpu's description of the slice (jax.experimental.topologies.
get_topology_desc, as the judge tier sees it): hosts of 2x2x1 chips with x fastest, then y, then
z; within a host x, then y; a chip's cores last.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence

Device = tuple[int, int, int, int]  # x, y, z, core
HOLE = (
    "they do not fill a box of chips (JAX's _get_physical_tpu_mesh asserts len(jax_devices) == "
    "np.prod(dims) * cores_per_chip)"
)
HOST_CHIPS = (2, 2, 1)  # accelerator_to_spec_map.py chips_per_host_bounds of every TPU here


def slice_devices(dims: Sequence[int], cores_per_chip: int) -> list[Device]:
    """A slice's JAX devices in libtpu's order; `dims` its chips per axis (x, y[, z])."""
    x, y, z = (*dims, 1)[:3]
    hx, hy, hz = HOST_CHIPS
    return [
        (host_x * hx + cx, host_y * hy + cy, host_z * hz + cz, core)
        for host_z in range(z // hz)
        for host_y in range(y // hy)
        for host_x in range(x // hx)
        for cz in range(hz)
        for cy in range(hy)
        for cx in range(hx)
        for core in range(cores_per_chip)
    ]


def mesh_problem(
    generation: str, devices: Sequence[Device], axes: Sequence[tuple[str, int]], allow_split: bool
) -> str | None:
    """Why JAX cannot lay the mesh `axes` (name and size, in the config's mesh_axes order) on
    `devices` of a generation's slice (v6e, v5p, tpu7x), or None when it can."""
    shape = [size for _, size in axes]
    if _own_layout(generation, devices, shape):
        return None
    box = physical_box(devices, four_d=generation == "tpu7x")
    if box is None:
        return HOLE
    physical = "x".join(map(str, box))
    if (axis := _whole_axes_unassignable(box, shape, generation == "tpu7x")) is None:
        return None
    name, size = axes[axis]
    if not allow_split:
        return (
            f"the {name} axis ({size}) is no product of whole physical axes of the {physical} "
            "box they fill, the others' axes taken first (JAX: 'Failed to find assignment')"
        )
    if (axis := _split_axes_unassignable(box, shape)) is not None:
        name, size = axes[axis]
        return f"the {name} axis ({size}) cannot be laid on the {physical} box they fill"
    return None


def _bounds(devices: Sequence[Device]) -> tuple[int, int, int]:
    """max coordinate + 1 per axis (mesh_utils.py:130-131)."""
    return tuple(max(d[i] for d in devices) + 1 for i in range(3))  # type: ignore[return-value]


def _own_layout(generation: str, devices: Sequence[Device], mesh_shape: Sequence[int]) -> bool:
    """Whether the device kind's own layout (mesh_utils.py:116-250) takes these devices."""
    n = len(devices)
    bx, by, bz = _bounds(devices)
    if generation == "v6e":  # "TPU v6 lite": _v5e_create_device_mesh
        return (
            (bx == by == 2 and bz == 1 and n == 4)
            or n == 8
            or (bx == by == 4 and bz == 1 and n == 16 and max(mesh_shape) == n)
        )
    if generation == "v5p":  # "TPU v5": _v5p_create_device_mesh
        return bx == by == bz == 2 and n == 8
    if generation == "tpu7x" and n % 8 == 0 and n <= 32:  # _7x_create_device_mesh
        box = physical_box(devices, four_d=True)
        return box is not None and box[0] <= 2 and box[1] <= 2
    return False


def physical_box(devices: Sequence[Device], *, four_d: bool) -> tuple[int, ...] | None:
    """The physical mesh's shape the devices fill (x, y, z[, cores]), None when they fill no box
    (mesh_utils.py:708-727, 770-774)."""
    spans = [max(d[i] for d in devices) - min(d[i] for d in devices) + 1 for i in range(4)]
    if len(set(devices)) != len(devices) or len(devices) != math.prod(spans):
        return None
    return tuple(spans) if four_d else tuple(spans[:3])


def _whole_axes_unassignable(
    box: tuple[int, ...], mesh_shape: Sequence[int], core_first: bool
) -> int | None:
    """The first mesh axis (from the last) no product of remaining whole physical axes fits,
    None when every axis fits (mesh_utils.py:296-385; TPU7x tries its core axis first)."""
    remaining = list(box)
    priority = {0: 1, 1: 2, 2: 3, 3: 0} if core_first and len(box) == 4 else None
    for axis in reversed(range(len(mesh_shape))):
        size = mesh_shape[axis]
        found = False
        for count in range(len(box), 0, -1):
            candidates = list(itertools.combinations(enumerate(remaining), count))
            if priority:
                candidates.sort(
                    key=lambda c: (
                        min(priority[i] for i, _ in c),
                        sum(priority[i] for i, _ in c),
                    )
                )
            for candidate in candidates:
                if math.prod(v for _, v in candidate) == size:
                    taken = {i for i, _ in candidate}
                    remaining = [0 if i in taken else v for i, v in enumerate(remaining)]
                    found = True
                    break
            if found:
                break
        if not found and size > 1:
            return axis
    return None


def _prime_factors(x: int) -> list[int]:
    factors, p = [], 2
    while p * p <= x:
        while x % p == 0:
            factors.append(p)
            x //= p
        p += 1
    return [*factors, x] if x > 1 else factors


def _feasible(box: tuple[int, ...], used: list[int], size: int) -> Iterator[tuple[int, ...]]:
    """Each way to lay a mesh axis of `size` on the box's axes by prime factors, given what the
    axes already hold (mesh_utils.py:498-562)."""
    wanted: dict[int, int] = {}
    for factor in _prime_factors(size):
        wanted[factor] = wanted.get(factor, 0) + 1
    by_factor: dict[int, list[int]] = {}
    for axis, available in enumerate(b // u for b, u in zip(box, used, strict=True)):
        for factor in _prime_factors(available):
            if factor in wanted:
                by_factor.setdefault(factor, []).append(axis)
    choices = [set(itertools.combinations(by_factor.get(f, []), n)) for f, n in wanted.items()]
    for picked in itertools.product(*choices):
        result = [1] * len(box)
        for factor, axes in zip(wanted, picked, strict=True):
            for axis in axes:
                result[axis] *= factor
        yield tuple(result)


def _preferred(
    x: tuple[int, ...], y: tuple[int, ...], box: tuple[int, ...], used: list[int]
) -> bool:
    """mesh_utils.py:565-636: whole physical axes first, then more of them, then axes no
    busier axis took, then the larger in reverse lexical order."""

    def whole(a: tuple[int, ...]) -> tuple[int, int]:
        sizes = [s for i, s in enumerate(a) if s == box[i]]
        return math.prod(sizes), len([s for s in sizes if s > 1])

    if whole(x) != whole(y):
        return whole(x) > whole(y)
    apart_x = math.prod(s for i, s in enumerate(x) if used[i] > 1)
    apart_y = math.prod(s for i, s in enumerate(y) if used[i] > 1)
    if apart_x != apart_y:
        return apart_x > apart_y
    return x > y


def _split_axes_unassignable(box: tuple[int, ...], mesh_shape: Sequence[int]) -> int | None:
    """The first mesh axis (from the last) the splitting assignment finds no place for, None
    when all are laid (mesh_utils.py:406-480)."""
    used = [1] * len(box)
    for axis in reversed(range(len(mesh_shape))):
        best: tuple[int, ...] | None = None
        for option in _feasible(box, used, mesh_shape[axis]):
            if best is None or _preferred(option, best, box, used):
                best = option
        if best is None:
            return axis
        used = [u * b for u, b in zip(used, best, strict=True)]
    return None
