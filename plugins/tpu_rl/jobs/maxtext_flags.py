"""MaxText's command lines for a run: the conversion, GRPO training and export flags."""

from __future__ import annotations

import dataclasses
import shlex
from typing import Any

from tpu_rl.layout import RunLayout
from tpu_rl.settings.fields import SETTING_FIELDS
from tpu_rl.settings.metadata import maxtext_flag

TOKEN_ENV = "HF_TOKEN"
TOKEN_FLAG = f"hf_access_token=${{{TOKEN_ENV}}}"
DEFAULT_REVISION = "main"


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
    # to_maxtext.py's argparse (maxtext-v0.2.4) has --revision; without it the Hub's default
    # branch, main, is converted: the tutorial's command
    revision = [flag("--revision", s.hf_revision)] if s.hf_revision != DEFAULT_REVISION else []
    return [
        flag("model_name", s.model_name),
        TOKEN_FLAG,
        flag("--hf_model_path", s.hf_model_path),
        *revision,
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


# tokenizer_path, declared with the model, stands where the tutorial's command has it:
# setting -> the setting whose flag it precedes.
TUTORIAL_PLACES = {"tokenizer_path": "ici_tensor_parallelism"}


def _train_setting_fields() -> tuple[dataclasses.Field, ...]:
    """The settings that become train_rl flags, in declaration order but for TUTORIAL_PLACES."""
    found = [
        f for f in SETTING_FIELDS.values() if maxtext_flag(f) and f.name not in TUTORIAL_PLACES
    ]
    for name, before in TUTORIAL_PLACES.items():
        found.insert(next(i for i, f in enumerate(found) if f.name == before), SETTING_FIELDS[name])
    return tuple(found)


TRAIN_SETTING_FIELDS = _train_setting_fields()


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
        *(flag(maxtext_flag(f), getattr(s, f.name)) for f in TRAIN_SETTING_FIELDS),
        flag("vllm_additional_config", vllm_additional_config(layout)),
        *s.extra_train_args,
    ]


def python_command(module: str, flags: list[str]) -> str:
    """A shell line running `python3 -m module flags`, the token read from the environment."""
    words = [
        f'hf_access_token="${{{TOKEN_ENV}}}"' if f == TOKEN_FLAG else shlex.quote(f) for f in flags
    ]
    return " ".join(["python3", "-m", module, *words])
