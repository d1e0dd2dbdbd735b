"""Bounds of the integer settings: checked first, since other rules compute with them."""

from __future__ import annotations

from collections.abc import Iterator

from tpu_rl.settings.run_settings import SETTING_FIELDS, RunSettings

# (minimum, maximum) of every integer setting; bounds well past any real run, so that a
# typo such as 10**400 is a settings error rather than an OverflowError somewhere later.
INT_BOUNDS: dict[str, tuple[int, int]] = {
    "cluster_nodepool_count": (1, 64),
    "num_batches": (1, 10_000_000),
    "batch_size": (1, 65_536),
    "train_micro_batch_size": (1, 65_536),
    "max_target_length": (1, 1_048_576),
    "max_prefill_predict_length": (1, 1_048_576),
    "rollout_tensor_parallelism": (1, 4096),
    "rollout_expert_parallelism": (1, 4096),
    # -1: auto, for one of the three; the mesh rule checks the rest
    "ici_tensor_parallelism": (-1, 4096),
    "ici_expert_parallelism": (-1, 4096),
    "ici_fsdp_parallelism": (-1, 4096),
    "decode_sampling_top_k": (1, 1_000_000),
    "learning_rate_schedule_steps": (1, 100_000_000),
    "rl_num_generations": (1, 4096),  # group_size asks for at least 2
    "rl_reshard_chunk_size": (1, 4096),
    "checkpoint_period": (1, 10_000_000),
    "backend_restarts": (0, 1000),
    "max_training_restarts": (0, 100),
    "poll_interval_seconds": (1, 3600),
    "pending_timeout_minutes": (1, 7 * 24 * 60),
    "cluster_timeout_minutes": (1, 24 * 60),
    "conversion_timeout_minutes": (1, 7 * 24 * 60),
    "training_timeout_minutes": (1, 30 * 24 * 60),
    "export_timeout_minutes": (1, 7 * 24 * 60),
}
DEFAULT_INT_BOUNDS = (-(2**31), 2**31 - 1)  # an int setting without its own bounds


def positive_counts(s: RunSettings) -> Iterator[str]:
    """Every integer setting within its bounds."""
    for name, f in SETTING_FIELDS.items():
        if str(f.type) != "int":
            continue
        low, high = INT_BOUNDS.get(name, DEFAULT_INT_BOUNDS)
        value = getattr(s, name)
        shown = (
            value if abs(value) < 10**30 else f"a {int(value.bit_length() * 0.30103)}-digit number"
        )
        if value < low:
            yield f"{name}: must be {'0 or more' if low == 0 else f'at least {low}'}, got {shown}"
        elif value > high:
            yield f"{name}: must be at most {high}, got {shown}"
