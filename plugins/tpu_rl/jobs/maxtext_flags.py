"""MaxText's command lines for a run: the conversion, GRPO training and export flags."""

from __future__ import annotations

import shlex
from typing import Any

from tpu_rl.layout import RunLayout

TOKEN_ENV = "HF_TOKEN"
TOKEN_FLAG = f"hf_access_token=${{{TOKEN_ENV}}}"


def flag(name: str, value: Any) -> str:
    """A MaxText key=value flag; floats in short form."""
    if isinstance(value, float):
        value = format(value, "g")
    return f"{name}={value}"


def _json_bool(value: bool) -> str:
    return "true" if value else "false"


def conversion_flags(layout: RunLayout) -> list[str]:
    """to_maxtext's flags, as in the tutorial."""
    s = layout.settings
    return [
        flag("model_name", s.model_name),
        TOKEN_FLAG,
        flag("--hf_model_path", s.hf_model_path),
        flag("base_output_directory", layout.maxtext_dir),
        flag("scan_layers", s.scan_layers),
        "use_multimodal=False",
        "skip_jax_distributed_system=true",
        "checkpoint_storage_use_zarr3=0",
        "checkpoint_storage_use_ocdbt=0",
        "hardware=cpu",
        "--lazy_load_tensors=True",
    ]


def export_flags(layout: RunLayout, step: int) -> list[str]:
    """to_huggingface's flags, from checkpoint `step` of this run."""
    s = layout.settings
    return [
        flag("model_name", s.model_name),
        TOKEN_FLAG,
        flag("load_parameters_path", layout.checkpoint_params(step)),
        flag("base_output_directory", layout.export_dir),
        "skip_jax_distributed_system=true",
        "hardware=cpu",
        flag("scan_layers", s.scan_layers),
        "use_multimodal=False",
        flag("weight_dtype", s.weight_dtype),
        "--override_model_architecture",
    ]


def vllm_additional_config(layout: RunLayout) -> str:
    s = layout.settings
    return (
        "{'maxtext_config': {"
        f"'model_name': '{s.model_name}', 'model_call_mode': 'inference', "
        f"'enable_dp_attention': {_json_bool(s.enable_dp_attention)}, "
        f"'allow_split_physical_axes': {_json_bool(s.allow_split_physical_axes)}, "
        "'use_ragged_sort': false, "
        f"'ragged_gather_reduce_fallback': {_json_bool(s.ragged_gather_reduce_fallback)}, "
        f"'prefuse_moe_weights': true, 'weight_dtype': '{s.weight_dtype}'}}}}"
    )


TRAIN_SETTING_FLAGS = (
    "data_template_path",
    "num_batches",
    "batch_size",
    "train_micro_batch_size",
    "max_target_length",
    "max_prefill_predict_length",
    "mu_dtype",
    "grad_dtype",
    "rollout_tensor_parallelism",
    "rollout_expert_parallelism",
    "trainer_devices_fraction",
    "sampler_devices_fraction",
    "tokenizer_path",
    "ici_tensor_parallelism",
    "ici_expert_parallelism",
    "ici_fsdp_parallelism",
    "hbm_utilization_vllm",
    "remat_policy",
    "async_scheduling",
    "allow_split_physical_axes",
    "ragged_gather_reduce_fallback",
    "enable_dp_attention",
    "decode_sampling_temperature",
    "decode_sampling_top_k",
    "decode_sampling_nucleus_p",
    "learning_rate",
    "learning_rate_schedule_steps",
    "checkpoint_period",
)


def train_flags(layout: RunLayout) -> list[str]:
    """train_rl's flags: the tutorial's, with this run's own run_name and paths."""
    s = layout.settings
    return [
        flag("run_name", layout.slug),
        flag("base_output_directory", layout.trained_dir),
        flag("model_name", s.model_name),
        flag("scan_layers", s.scan_layers),
        flag("load_parameters_path", layout.maxtext_items),
        TOKEN_FLAG,
        *(flag(name, getattr(s, name)) for name in TRAIN_SETTING_FLAGS),
        flag("rl.num_generations", s.rl_num_generations),
        flag("rl.reshard_chunk_size", s.rl_reshard_chunk_size),
        flag("debug", s.debug),
        flag("vllm_hf_overrides", s.vllm_hf_overrides),
        flag("vllm_additional_config", vllm_additional_config(layout)),
        *s.extra_train_args,
    ]


def python_command(module: str, flags: list[str]) -> str:
    """A shell line running `python3 -m module flags`, the token read from the environment."""
    words = [
        f'hf_access_token="${{{TOKEN_ENV}}}"' if f == TOKEN_FLAG else shlex.quote(f) for f in flags
    ]
    return " ".join(["python3", "-m", module, *words])
