"""The GRPO rules of validation: batches, sequence lengths and the trainer/sampler meshes."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator

from tpu_rl.settings.fields import RunSettings


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


def _whole_chips(s: RunSettings, fraction_name: str) -> int | str | None:
    """Chips behind a fraction setting: a count, an error when not whole, None to skip.

    None when the topology or the fraction is invalid: other rules report those.
    """
    fraction = getattr(s, fraction_name)
    if not s.chips or not 0 < fraction <= 1:
        return None
    total = s.chips * s.cluster_nodepool_count
    exact = total * fraction
    if abs(exact - round(exact)) > 1e-9 or round(exact) == 0:
        return f"{fraction_name}: {fraction} of {total} chips is not a whole number of chips"
    return round(exact)


MeshCheck = Callable[[RunSettings, int], Iterator[str]]
Rule = Callable[[RunSettings], Iterator[str]]


def _on_whole_chips(fraction_name: str) -> Callable[[MeshCheck], Rule]:
    """A mesh rule that runs only once its share of the slice is a whole number of chips."""

    def wrap(check: MeshCheck) -> Rule:
        @functools.wraps(check)
        def run(s: RunSettings) -> Iterator[str]:
            devices = _whole_chips(s, fraction_name)
            if isinstance(devices, str):
                yield devices
            elif isinstance(devices, int):
                yield from check(s, devices)

        return run

    return wrap


@_on_whole_chips("trainer_devices_fraction")
def trainer_mesh(s: RunSettings, devices: int) -> Iterator[str]:
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
            f"{' x auto' if auto else ''} does not fit the trainer's {devices} chips"
        )


@_on_whole_chips("sampler_devices_fraction")
def sampler_mesh(s: RunSettings, devices: int) -> Iterator[str]:
    product = s.rollout_tensor_parallelism * s.rollout_expert_parallelism
    if product >= 1 and devices % product:
        yield (
            f"rollout_tensor_parallelism x rollout_expert_parallelism = {product} does not "
            f"divide the sampler's {devices} chips"
        )


GRPO_RULES = (
    batch_division,
    sequence_lengths,
    group_size,
    device_fractions,
    trainer_mesh,
    sampler_mesh,
)
