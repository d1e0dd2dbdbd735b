"""The GRPO rules of validation: batches, sequence lengths and the trainer/sampler meshes."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator

from tpu_rl.settings.device_mesh import HOLE, mesh_problem, slice_devices
from tpu_rl.settings.fields import RunSettings
from tpu_rl.tpu import dims_of, generation_of

# maxtext-v0.2.4 src/maxtext/configs/types.py:1100-1116: RLConfig's mesh_axes, the order
# create_device_mesh lays the ICI axes in (utils/maxtext_utils.py:2186-2209); the run sets fsdp,
# tensor and expert, the others are 1 (configs/base.yml:672-684)
MESH_AXES = (
    "data",
    "stage",
    "fsdp",
    "fsdp_transpose",
    "sequence",
    "context",
    "context_usp_ulysses",
    "context_autoregressive",
    "tensor",
    "tensor_sequence",
    "expert",
    "autoregressive",
)


def batch_division(s: RunSettings) -> Iterator[str]:
    if s.train_micro_batch_size >= 1 and s.batch_size % s.train_micro_batch_size:
        yield (
            f"train_micro_batch_size: {s.train_micro_batch_size} does not divide "
            f"batch_size {s.batch_size}"
        )


def sequence_lengths(s: RunSettings) -> Iterator[str]:
    if s.max_prefill_predict_length >= s.max_target_length:
        yield (
            f"max_prefill_predict_length: {s.max_prefill_predict_length} must be below "
            f"max_target_length {s.max_target_length} (room to generate)"
        )


def group_size(s: RunSettings) -> Iterator[str]:
    if s.rl_num_generations < 2:
        yield (
            f"rl_num_generations: GRPO compares answers within a group; needs at least 2, "
            f"got {s.rl_num_generations}"
        )


def device_fractions(s: RunSettings) -> Iterator[str]:
    for name in ("trainer_devices_fraction", "sampler_devices_fraction"):
        if not 0 < getattr(s, name) <= 1:
            yield f"{name}: must be in (0, 1], got {getattr(s, name)}"
    total = s.trainer_devices_fraction + s.sampler_devices_fraction
    if total > 1 + 1e-9:
        yield (
            f"trainer_devices_fraction + sampler_devices_fraction: {total:g} exceeds 1 "
            "(the trainer and sampler would share chips)"
        )


def _role_devices(s: RunSettings, fraction_name: str) -> int | str | None:
    """The JAX devices of one role (trainer or sampler) as MaxText gives them: a count, an error
    when a fraction is not whole devices, None to skip.

    maxtext-v0.2.4 src/maxtext/utils/model_creation_utils.py: on one slice (671-690), with 2 VMs
    or more (a VM's devices: its chips_per_vm flag) and Pathways, the first and last
    int(devices x fraction) devices; on one VM both roles share all devices. With trainer and
    sampler slices (691-740) each trainer slice is one trainer mesh and the sampler gets its
    slices' devices. A JAX device is a chip but on tpu7x, two per chip (tpu_rl.tpu). None when
    the TPU shape, a fraction or the slice counts are invalid: other rules report those.
    """
    fraction: float = getattr(s, fraction_name)
    if not (s.chips and generation_of(s.tpu_type) and 0 < fraction <= 1):
        return None
    per_slice = s.slices.devices_per_slice
    if s.num_trainer_slices > 0 and s.num_samplers_slices > 0:
        trainer = fraction_name == "trainer_devices_fraction"
        return per_slice if trainer else per_slice * s.num_samplers_slices
    if s.num_trainer_slices != -1 or s.num_samplers_slices != -1 or s.cluster_nodepool_count > 1:
        return None
    if s.slices.hosts_per_slice < 2:
        return per_slice
    exact = per_slice * fraction
    if abs(exact - round(exact)) > 1e-9 or round(exact) == 0:
        return (
            f"{fraction_name}: {fraction} of the {per_slice} devices of a {s.tpu_type} is not a "
            "whole number of devices"
        )
    return round(exact)


MeshCheck = Callable[[RunSettings, int], Iterator[str]]
Rule = Callable[[RunSettings], Iterator[str]]


def _on_whole_devices(fraction_name: str) -> Callable[[MeshCheck], Rule]:
    """A mesh rule that runs only once its role's devices are known and whole."""

    def wrap(check: MeshCheck) -> Rule:
        @functools.wraps(check)
        def run(s: RunSettings) -> Iterator[str]:
            devices = _role_devices(s, fraction_name)
            if isinstance(devices, str):
                yield devices
            elif isinstance(devices, int):
                yield from check(s, devices)

        return run

    return wrap


def _ici_axes(s: RunSettings) -> dict[str, int]:
    return {
        "ici_tensor_parallelism": s.ici_tensor_parallelism,
        "ici_expert_parallelism": s.ici_expert_parallelism,
        "ici_fsdp_parallelism": s.ici_fsdp_parallelism,
    }


def _malformed(axes: dict[str, int]) -> bool:
    return any(v == 0 or v < -1 for v in axes.values()) or list(axes.values()).count(-1) > 1


def _fixed(axes: dict[str, int]) -> str:
    """The product of the axes given, 'x auto' when one is -1."""
    fixed = math.prod(v for v in axes.values() if v != -1)
    return f"{fixed}{' x auto' if -1 in axes.values() else ''}"


def _filled_axes(s: RunSettings, devices: int) -> dict[str, int] | None:
    """MaxText's fill_unspecified_mesh_axes (maxtext-v0.2.4 src/maxtext/utils/max_utils.py:
    461-482) on the run's ICI axes for `devices`: each axis's size, None when they do not fill
    them (at most one axis -1, the others' product dividing the devices, the whole product equal
    to them)."""
    axes = _ici_axes(s)
    if _malformed(axes):
        return None
    fixed = math.prod(v for v in axes.values() if v != -1)
    if (-1 in axes.values() and devices % fixed) or (-1 not in axes.values() and devices != fixed):
        return None
    return {name: devices // fixed if v == -1 else v for name, v in axes.items()}


@_on_whole_devices("trainer_devices_fraction")
def trainer_mesh(s: RunSettings, devices: int) -> Iterator[str]:
    """The trainer's ICI axes fill its devices (max_utils.py:461-482)."""
    if _malformed(_ici_axes(s)):
        yield "ici_*_parallelism: each must be positive, and at most one may be -1 (auto)"
    elif _filled_axes(s, devices) is None:
        yield (
            f"ici_*_parallelism: tensor x expert x fsdp = {_fixed(_ici_axes(s))} does not fit "
            f"the trainer's {devices} devices on {s.tpu_type} (MaxText: the mesh's product must "
            f"equal the devices per slice); make the product {devices}, or one axis -1 and the "
            f"others' product divide {devices}"
        )


def _one_slice(s: RunSettings) -> bool:
    """One slice split by the fractions (model_creation_utils.py:671-690): the sampler's config
    is the trainer's (689-690), and both meshes lie on the one slice."""
    return s.cluster_nodepool_count == 1 and s.num_trainer_slices == s.num_samplers_slices == -1


def sampler_ici_mesh(s: RunSettings) -> Iterator[str]:
    """On one slice MaxText builds the rollout mesh from the trainer's config (model_creation_
    utils.py:689-690, 770: create_device_mesh(sampler_config, sampler_devices)): the trainer's
    ICI axes must fill the sampler's devices too (max_utils.py:479). Fractions of no whole
    devices: trainer_mesh and sampler_mesh report them."""
    trainer = _role_devices(s, "trainer_devices_fraction")
    devices = _role_devices(s, "sampler_devices_fraction")
    if not (_one_slice(s) and isinstance(trainer, int) and isinstance(devices, int)):
        return
    if _filled_axes(s, trainer) and _filled_axes(s, devices) is None:
        yield (
            f"ici_*_parallelism: tensor x expert x fsdp = {_fixed(_ici_axes(s))} fits the "
            f"trainer's {trainer} devices but not the sampler's {devices} on {s.tpu_type}: on one "
            "slice MaxText builds the rollout mesh with the trainer's ICI axes (model_creation_"
            "utils.py:689-690, 770) and fill_unspecified_mesh_axes asserts (max_utils.py:479); "
            "give both roles the same share (trainer_devices_fraction = sampler_devices_fraction), "
            f"or set one axis -1 and the others' product divide both {trainer} and {devices}"
        )


def physical_meshes(s: RunSettings) -> Iterator[str]:
    """JAX lays each role's mesh on its devices of the slice (maxtext_utils.py:2248-2272 ->
    jax mesh_utils.create_device_mesh, tpu_rl.settings.device_mesh): the devices must fill a box
    of chips and, without allow_split_physical_axes, each axis be a product of whole physical
    axes of that box."""
    generation = generation_of(s.tpu_type)
    dims = dims_of(s.topology)
    if not (_one_slice(s) and generation and len(dims) == generation.dimensions):
        return
    every = slice_devices(dims, generation.devices_per_chip)
    if len(every) != s.slices.devices_per_slice:
        return  # a topology of no whole hosts: tpu_shape reports it
    cited = (
        "MaxText's create_device_mesh (maxtext_utils.py:2248-2272) through jax "
        "mesh_utils.create_device_mesh"
    )
    for fraction_name, role in (
        ("trainer_devices_fraction", "trainer"),
        ("sampler_devices_fraction", "sampler"),
    ):
        count = _role_devices(s, fraction_name)
        if not isinstance(count, int) or not (filled := _filled_axes(s, count)):
            continue  # the ICI rules above report it
        devices = every[:count] if role == "trainer" else every[len(every) - count :]
        sizes = {
            "fsdp": filled["ici_fsdp_parallelism"],
            "tensor": filled["ici_tensor_parallelism"],
            "expert": filled["ici_expert_parallelism"],
        }
        axes = [(name, sizes.get(name, 1)) for name in MESH_AXES]
        problem = mesh_problem(generation.name, devices, axes, s.allow_split_physical_axes)
        where = (
            f"the {role}'s {count} devices of {s.tpu_type} ({s.topology}, the "
            f"{'first' if role == 'trainer' else 'last'} {count} of {len(every)})"
        )
        if problem is None:
            continue
        if problem == HOLE:
            yield (
                f"{fraction_name}: {where}: {problem}, so {cited} refuses them; choose fractions "
                "whose devices fill a box of whole hosts (2x2 chips each), e.g. 0.5 and 0.5"
            )
        elif not s.allow_split_physical_axes:
            yield (
                f"allow_split_physical_axes: false, and on {where} {problem}, so "
                f"{cited} refuses it; set allow_split_physical_axes true, or axes that are "
                "products of whole physical axes of that box"
            )
        else:
            yield (
                f"ici_*_parallelism: on {where} {problem} ({cited}); choose axes whose sizes "
                "divide that box's sides"
            )


@_on_whole_devices("sampler_devices_fraction")
def sampler_mesh(s: RunSettings, devices: int) -> Iterator[str]:
    """train_rl.py's get_rollout_kwargs_for_parallelism (maxtext-v0.2.4 src/maxtext/trainers/
    post_train/rl/train_rl.py:193-219): rollout_data_parallelism -1 (the run leaves it so) is the
    sampler devices / (tensor x expert), which must divide them."""
    product = s.rollout_tensor_parallelism * s.rollout_expert_parallelism
    if product >= 1 and devices % product:
        yield (
            f"rollout_tensor_parallelism x rollout_expert_parallelism = {product} does not "
            f"divide the sampler's {devices} devices on {s.tpu_type} (MaxText: "
            "num_sampler_devices must be divisible by them); make their product divide "
            f"{devices}"
        )


GRPO_RULES = (
    batch_division,
    sequence_lengths,
    group_size,
    device_fractions,
    trainer_mesh,
    sampler_mesh,
    sampler_ici_mesh,
    physical_meshes,
)
