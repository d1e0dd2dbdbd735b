"""MaxText's command lines for a run: the conversion, GRPO training, champion evaluation and
export flags."""

from __future__ import annotations

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


def uses_maxtext_adapter(overrides: str) -> bool:
    """Whether vLLM runs MaxText's own model (vllm_hf_overrides names MaxTextForCausalLM), as
    MaxText tells it (src/maxtext/integration/vllm/maxtext_vllm_rollout.py:131-141 at
    maxtext-v0.2.4, uses_maxtext_vllm_adapter)."""
    import json

    try:
        architectures = json.loads(overrides).get("architectures", ())
    except (ValueError, AttributeError):  # validate refuses it
        return False
    return "MaxTextForCausalLM" in (
        [architectures] if isinstance(architectures, str) else architectures
    )


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


def _train_setting_flags() -> dict[str, str]:
    """Each setting that becomes a train_rl flag -> that flag, in declaration order but for
    TUTORIAL_PLACES."""
    found = [
        f for f in SETTING_FIELDS.values() if maxtext_flag(f) and f.name not in TUTORIAL_PLACES
    ]
    for name, before in TUTORIAL_PLACES.items():
        found.insert(next(i for i, f in enumerate(found) if f.name == before), SETTING_FIELDS[name])
    return {f.name: flag_name for f in found if (flag_name := maxtext_flag(f))}


TRAIN_SETTING_FLAGS = _train_setting_flags()


# rl.yml's values of the flags shape_flags gives only when a run's differ (maxtext-v0.2.4
# src/maxtext/configs/post_train/rl.yml:21-23), so the tutorial's command stays as it is.
RL_CHIPS_PER_VM, RL_SLICES = 4, -1


def shape_flags(layout: RunLayout) -> list[str]:
    """The flags of the run's TPU generation, slices and model that differ from rl.yml's:
    chips_per_vm (MaxText counts a VM's JAX devices: 8 on tpu7x, run_qwen3_30b_rl.sh),
    num_trainer_slices and num_samplers_slices, chat_template_path."""
    s = layout.settings
    per_vm = s.slices.generation.devices_per_vm
    slices = {
        "num_trainer_slices": s.num_trainer_slices,
        "num_samplers_slices": s.num_samplers_slices,
    }
    given = {
        "chips_per_vm": per_vm if per_vm != RL_CHIPS_PER_VM else None,
        **{k: v for k, v in slices.items() if set(slices.values()) != {RL_SLICES}},
        "chat_template_path": s.chat_template_path or None,
    }
    return [flag(name, value) for name, value in given.items() if value is not None]


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
        *(flag(name, getattr(s, setting)) for setting, name in TRAIN_SETTING_FLAGS.items()),
        *shape_flags(layout),
        *adapter_flags(layout),
        *s.extra_train_args,
    ]


def adapter_flags(layout: RunLayout) -> list[str]:
    """vllm_additional_config with MaxText's model in vLLM only: a `maxtext_config` there is what
    makes MaxText sync the trainer's weights to the sampler directly, MaxText to MaxText
    (maxtext_vllm_rollout.py:531-537, model_creation_utils.py:777), wrong for vLLM's own model of
    the checkpoint's architecture, which the scripts without the adapter run with none
    (run_gptoss_20b_rl.sh:94-117)."""
    if not uses_maxtext_adapter(layout.settings.vllm_hf_overrides):
        return []
    return [flag("vllm_additional_config", vllm_additional_config(layout))]


# train_rl scoring a checkpoint without training it, on MaxText 0.2.4. Google's accelerated-
# platforms RL reference (platforms/gke/base/use-cases/reinforcement-learning/kubernetes-manifests/
# rl-tpu-maxtext-grpo-single-host/checkpoint-evaluation/base/configmap-script.yaml) runs train_rl
# with `num_batches=0` on MaxText 0.2.3; 0.2.4 refuses it (src/maxtext/configs/types.py,
# RLDataset.num_batches: `Field(4, ge=1)`). The same zero is reached through train_fraction
# (`gt=0.0, le=1.0`, same class): RLConfig.set_derived_and_validate_values sets
# `train_steps = int(num_batches * num_iterations * train_fraction * num_epoch)` and
# trainers/post_train/rl/train_rl.py, prepare_datasets, keeps
# `int(num_batches * batch_size * train_fraction)` training examples: both 0 at this fraction for
# any batch size and step count the settings allow (at most 65,536 x 10,000,000 < 10**12), with
# room for num_iterations x num_epoch up to 1,000 from extra_train_args.
# _rl_train_impl then logs `Pre RL Training: ...` after `rl_cluster.rollout.update_params(
# nnx.state(actor_model, nnx.Param))`, the actor being the model loaded from
# load_parameters_path (utils/model_creation_utils.py, create_models_and_meshes), trains on the
# empty dataset and logs `Post RL Training` of the same weights. The optimizer's schedule stays
# valid: the run's learning_rate_schedule_steps (>= 1) differs from steps (0), so
# utils_rl.get_optimizer uses it rather than train_steps (optax refuses a 0-step cosine decay).
NO_TRAINING_FRACTION = 1e-15
# Set per evaluation, whatever the run's settings or extra_train_args say.
EVALUATION_OVERRIDES = ("run_name", "load_parameters_path", "train_fraction")


PARAMS_ITEM = "model_params"  # an actor checkpoint step's parameters (layout.checkpoint_params)


def checkpoint_parameters(checkpoint_uri: str) -> str:
    """The parameters folder train_rl loads from an actor checkpoint, given the step's folder
    (`.../actor/<step>/`, as the champion record may hold it) or the parameters folder itself:
    `.../actor/<step>/model_params/`, as export loads it and as Google's checkpoint-evaluation
    reference sets LOAD_PARAMETERS_PATH (`.../checkpoints/actor/25/model_params`)."""
    base = checkpoint_uri.rstrip("/")
    return f"{base}/" if base.endswith(f"/{PARAMS_ITEM}") else f"{base}/{PARAMS_ITEM}/"


def champion_evaluation_flags(layout: RunLayout, parameters_uri: str) -> list[str]:
    """train_rl's flags that score the checkpoint at `parameters_uri` (a MaxText parameters
    folder, as export's load_parameters_path) on this run's evaluation set and settings, with
    no training step: the run's own flags but its run_name, load_parameters_path and
    train_fraction (NO_TRAINING_FRACTION says why). Its run_name is its own, so Tunix restores
    no checkpoint of this run over the loaded one."""
    kept = [f for f in train_flags(layout) if f.split("=", 1)[0] not in EVALUATION_OVERRIDES]
    return [
        flag("run_name", layout.champion_job_base),
        flag("load_parameters_path", parameters_uri),
        *kept,
        flag("train_fraction", NO_TRAINING_FRACTION),
    ]


def python_command(module: str, flags: list[str]) -> str:
    """A shell line running `python3 -m module flags`, the token read from the environment."""
    words = [
        f'hf_access_token="${{{TOKEN_ENV}}}"' if f == TOKEN_FLAG else shlex.quote(f) for f in flags
    ]
    return " ".join(["python3", "-m", module, *words])
