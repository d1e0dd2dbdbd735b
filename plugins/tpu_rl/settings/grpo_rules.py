"""The GRPO rules of validation: batches, sequence lengths and the trainer/sampler meshes."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator

from tpu_rl.settings.fields import RunSettings
from tpu_rl.tpu import generation_of


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
    generation = generation_of(s.tpu_type)
    fraction = getattr(s, fraction_name)
    if not (s.chips and generation and 0 < fraction <= 1):
        return None
    per_slice = s.chips * generation.devices_per_chip
    if s.num_trainer_slices > 0 and s.num_samplers_slices > 0:
        trainer = fraction_name == "trainer_devices_fraction"
        return per_slice if trainer else per_slice * s.num_samplers_slices
    if s.num_trainer_slices != -1 or s.num_samplers_slices != -1 or s.cluster_nodepool_count > 1:
        return None
    if per_slice // generation.devices_per_vm < 2:
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


@_on_whole_devices("trainer_devices_fraction")
def trainer_mesh(s: RunSettings, devices: int) -> Iterator[str]:
    """MaxText's fill_unspecified_mesh_axes (maxtext-v0.2.4 src/maxtext/utils/max_utils.py:
    461-482): at most one axis -1, the others' product dividing the devices of a slice, the whole
    product equal to them."""
    axes = {
        "ici_tensor_parallelism": s.ici_tensor_parallelism,
        "ici_expert_parallelism": s.ici_expert_parallelism,
        "ici_fsdp_parallelism": s.ici_fsdp_parallelism,
    }
    auto = [name for name, v in axes.items() if v == -1]
    if any(v == 0 or v < -1 for v in axes.values()) or len(auto) > 1:
        yield "ici_*_parallelism: each must be positive, and at most one may be -1 (auto)"
        return
    fixed = math.prod(v for v in axes.values() if v != -1)
    if (auto and devices % fixed) or (not auto and devices != fixed):
        yield (
            f"ici_*_parallelism: tensor x expert x fsdp = {fixed}"
            f"{' x auto' if auto else ''} does not fit the trainer's {devices} devices on "
            f"{s.tpu_type} (MaxText: the mesh's product must equal the devices per slice); "
            f"make the product {devices}, or one axis -1 and the others' product divide {devices}"
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
)
