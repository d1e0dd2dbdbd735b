"""The catalogue's cells: one model on one TPU type and topology, with the trainer mesh, rollout
parallelism and vLLM memory share of the public run or script it follows, and that source's date.

A cell fills the settings a run leaves unset (CELL_SETTINGS, tpu_rl.settings.cell_defaults):
its model's, its TPU shape's, and what its source sets, as `overrides` keyed by setting name;
the settings' own defaults (tpu_rl.settings.fields) give the rest, and
tpu_rl.settings.cell_defaults.cell_problems checks every override against the setting's field.
Validation checks any mesh, a cell's or a user's, with MaxText's own rules
(tpu_rl.settings.grpo_rules).
Paths are AI-Hypercomputer/maxtext's at tag maxtext-v0.2.4 (commit 538fe7a, 2026-08-21); a date
is the cited file's last commit at that tag. The settings' defaults are the tutorial's cell's; a
cell whose source runs rl.yml takes MaxText's values where the source sets none (RL_YML: rl.yml's
fractions 0.5/0.5, rollout parallelism 1, hbm_utilization_vllm 0.72, async_scheduling and
enable_dp_attention, and the trainer's default mesh, FSDP over all its chips); those defaults are
named in the cell's `follows`.

A cell also takes its source's rollout engine path (vllm_hf_overrides, and tpu-inference's
MODEL_IMPL_TYPE as rollout_model_impl), optimizer (train_rl builds optax.adamw,
src/maxtext/trainers/post_train/rl/utils_rl.py:587-645; only the tutorial patches it to
adafactor), async_scheduling and enable_dp_attention (rl.yml:175 and 180 where the source sets
neither). What no setting carries, `follows` says: where the cell departs from its source, and
why. Every script's proxy XLA flags (xpk's --custom-pathways-proxy-server-args) are one such
departure: the backend's proxy runs the tutorial's arguments (tpu_rl.backend.jobset), the
flags tune collectives and memory on the scripts' TPUs and change no result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from tpu_rl.catalogue.models import MODELS, Model
from tpu_rl.tpu import TpuGeneration, generation_for

# vLLM's model of the checkpoint's Hugging Face architecture, through tpu-inference, where the
# settings' default runs MaxText's own model through MaxText's adapter (the tutorial's
# vllm_hf_overrides); "{}" is MaxText's default (src/maxtext/configs/base.yml:1338)
VLLM_OWN_MODEL = "{}"
# MaxText's values of the settings a source running rl.yml leaves unset: rl.yml's
# (src/maxtext/configs/post_train/rl.yml:19-20, 26-27, 166, 175, 180), the trainer's default
# mesh, FSDP over all its chips (src/maxtext/configs/base.yml:674, 680, 684), and train_rl's
# optimizer, optax.adamw (src/maxtext/trainers/post_train/rl/utils_rl.py:587-645)
RL_YML: Mapping[str, Any] = MappingProxyType(
    {
        "trainer_devices_fraction": 0.5,
        "sampler_devices_fraction": 0.5,
        "rollout_tensor_parallelism": 1,
        "rollout_expert_parallelism": 1,
        "hbm_utilization_vllm": 0.72,
        "enable_dp_attention": False,
        "async_scheduling": True,
        "ici_fsdp_parallelism": -1,
        "ici_tensor_parallelism": 1,
        "ici_expert_parallelism": 1,
        "optimizer": "adamw",
    }
)
# The settings a cell gives a run that leaves them unset (tpu_rl.settings.cell_defaults), in this
# order: its model's, its TPU shape's, and those its source may set (a cell's `overrides`). The
# trigger form starts them empty (tpu_rl.settings.param_specs), so that the run's cell fills them.
MODEL_SETTINGS = ("hf_model_path", "tokenizer_path", "chat_template_path")
SHAPE_SETTINGS = ("tpu_type", "topology", "compute_type")
SOURCE_SETTINGS = (
    "cloud_image_name",
    "scan_layers",
    "ici_tensor_parallelism",
    "ici_expert_parallelism",
    "ici_fsdp_parallelism",
    "rollout_tensor_parallelism",
    "rollout_expert_parallelism",
    "hbm_utilization_vllm",
    "trainer_devices_fraction",
    "sampler_devices_fraction",
    "optimizer",
    "async_scheduling",
    "enable_dp_attention",
    "vllm_hf_overrides",
    "rollout_model_impl",
)
CELL_SETTINGS = (*MODEL_SETTINGS, *SHAPE_SETTINGS, *SOURCE_SETTINGS)


def sets(**overrides: Any) -> Mapping[str, Any]:
    """A cell's `overrides`: the settings its source sets, by name."""
    return MappingProxyType(overrides)


def over_rl_yml(**overrides: Any) -> Mapping[str, Any]:
    """A cell's `overrides` when its source runs rl.yml: MaxText's values (RL_YML), then the
    settings the source sets."""
    return MappingProxyType({**RL_YML, **overrides})


@dataclass(frozen=True)
class Cell:
    """One model on one TPU slice shape, and the run it follows."""

    model_name: str
    tpu_type: str
    topology: str
    follows: str  # the public run or script, with what it sets
    date: str  # that source's date
    # the settings the source sets, by name (SOURCE_SETTINGS'); the settings' defaults give the
    # rest (tpu_rl.settings.cell_defaults.cell_settings)
    overrides: Mapping[str, Any] = field(hash=False)
    # the source ran it as a Pathways workload (every run here runs a Pathways backend)
    pathways: bool = True
    # images pinned by digest in the cell's source, and where (a record: the run's images are
    # its settings, tpu_rl.settings.images); empty where the source publishes none. No public
    # digest of the MaxText image every cell runs (the settings' cloud_image_name, the tutorial's
    # tag of MaxText 0.2.4's post-training image) is known (searched 2026-12-05: MaxText at
    # maxtext-v0.2.4, its RL scripts, tutorials and end-to-end tests, the Pathways and GKE docs):
    # the RL scripts run an image the user builds (`DOCKER_IMAGE`, "the Docker image you
    # pushed"), so none of them publishes a MaxText digest.
    known_good_images: tuple[str, ...] = ()
    images_source: str = ""

    @property
    def model(self) -> Model:
        return MODELS[self.model_name]

    @property
    def generation(self) -> TpuGeneration:
        return generation_for(self.tpu_type)

    def settings(self) -> dict[str, Any]:
        """The settings this cell sets: its model's, its TPU shape's and its source's
        (`overrides`); the settings' defaults give the rest of CELL_SETTINGS
        (tpu_rl.settings.cell_defaults.cell_settings)."""
        return {
            "model_name": self.model_name,
            "hf_model_path": self.model.hf_id,
            "tokenizer_path": self.model.tokenizer,
            "chat_template_path": self.model.chat_template,
            "tpu_type": self.tpu_type,
            "topology": self.topology,
            "compute_type": self.generation.machine_type,
            **self.overrides,
        }


SCRIPTS = "src/maxtext/trainers/post_train/rl/scripts"
NO_XLA_FLAGS = (
    "its proxy XLA flags are not passed (the backend's proxy runs the tutorial's arguments; "
    "they tune, they change no result)"
)
ADAPTER_CONFIG = (
    "vllm_additional_config's maxtext_config has the tutorial's keys "
    "(tpu_rl.jobs.maxtext_flags.vllm_additional_config)"
)
AS_PATHWAYS = (
    "train_rl runs as a Pathways client (rl.md:106-117 runs it on the TPU VM): the product's "
    "one way to reach the TPUs"
)
CELLS: tuple[Cell, ...] = (
    # The tutorial's cell, first: the settings' defaults (tpu_rl.settings.fields). Its mesh is the
    # tutorial's train_rl command (the copy in tests/fixtures/vendor/seed/, lines 244-252); the
    # page shows no date, so the cell carries the MaxText tag's it pins.
    # tests/end_to_end/tpu/gemma4/26b/test_gemma4_rl.sh trains the same model with
    # ici_expert_parallelism=4, rollout_tensor_parallelism=2.
    Cell(
        "gemma4-26b",
        "v6e-32",
        "4x8",
        "the Google Cloud tutorial 'Run Gemma 4 26B multi-host RL training on TPU v6e' "
        "(tests/fixtures/vendor/seed/)",
        "2026-08-21",
        sets(
            ici_tensor_parallelism=2,
            ici_expert_parallelism=4,
            rollout_tensor_parallelism=4,
            hbm_utilization_vllm=0.7,
            # the tutorial's command (seed lines 227, 254, 257, 266)
            optimizer="adafactor",
            async_scheduling=False,
        ),
    ),
    # TPU_TYPE v6e-32, chips_per_vm=4, ici_tensor_parallelism=2, rollout_data_parallelism=8 x
    # rollout_tensor_parallelism=2 (16 sampler chips), hbm_utilization_vllm=0.5, scan_layers=False
    Cell(
        "gemma4-e4b",
        "v6e-32",
        "4x8",
        f"{SCRIPTS}/run_gemma4_e4b_rl.sh (xpk create-pathways, --num-slices=1): AdamW, "
        "async_scheduling (:99), enable_dp_attention (:151), MaxTextForCausalLM (:163); departs: "
        f"{NO_XLA_FLAGS} (:59-77, 179); {ADAPTER_CONFIG}, the script's also log_config false "
        "(:164)",
        "2026-07-17",
        over_rl_yml(
            ici_tensor_parallelism=2,
            rollout_tensor_parallelism=2,
            hbm_utilization_vllm=0.5,
            enable_dp_attention=True,
        ),
        known_good_images=(
            "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server"
            "@sha256:d03068b39a8a2fab0621086ccb7c9445ce17ad34f1520159ca4ecd395346a162",
            "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server"
            "@sha256:6342a3cae2818d2f887d396e9ae4156b3316f79fef186d71ff16d535b44e1724",
        ),
        images_source=f"{SCRIPTS}/run_gemma4_e4b_rl.sh:28-29 (PATHWAYS_SERVER_IMAGE, "
        "PATHWAYS_PROXY_SERVER_IMAGE: 'Pathways component images, pinned to specific versions')",
    ),
    # docs/tutorials/posttraining/rl.md:21 ("a single host TPU-VM such as v6e-8/v5p-8"), with
    # rl.yml's defaults; here on 2 ct6e-standard-4t hosts (xpk's v6e-8, tpu_rl.tpu), so Pathways
    # splits the chips 4/4.
    Cell(
        "llama3.1-8b",
        "v6e-8",
        "2x4",
        "docs/tutorials/posttraining/rl.md:21 with rl.yml's defaults: AdamW, vLLM's own Llama "
        f"(no vllm_hf_overrides, rl.md:111-117); departs: {AS_PATHWAYS}",
        "2026-06-21",
        over_rl_yml(vllm_hf_overrides=VLLM_OWN_MODEL),
        pathways=False,  # train_rl on the TPU VM itself (rl.md:112-117)
    ),
    # the same on v5p-8: one VM of 4 chips, so trainer and sampler share them (model_creation_
    # utils.py:671-690 splits only across 2 VMs or more)
    Cell(
        "llama3.1-8b",
        "v5p-8",
        "2x2x1",
        "docs/tutorials/posttraining/rl.md:21 with rl.yml's defaults: AdamW, vLLM's own Llama "
        f"(no vllm_hf_overrides, rl.md:111-117); departs: {AS_PATHWAYS}",
        "2026-06-21",
        over_rl_yml(vllm_hf_overrides=VLLM_OWN_MODEL),
        pathways=False,  # train_rl on the TPU VM itself (rl.md:112-117)
    ),
    # TPU_TYPE v5p-64, chips_per_vm=4, rollout_data_parallelism=2 x rollout_tensor_parallelism=8
    # (16 sampler chips), hbm_utilization_vllm=0.8; scan_layers=true:
    # tests/end_to_end/tpu/gpt_oss/20b/test_gpt_oss_rl.sh (2026-08-18)
    Cell(
        "gpt-oss-20b",
        "v5p-64",
        "2x4x4",
        f"{SCRIPTS}/run_gptoss_20b_rl.sh (xpk create-pathways, --num-slices=1): AdamW, "
        "tpu-inference's own gpt-oss (MODEL_IMPL_TYPE=flax_nnx :82, no vllm_hf_overrides "
        "or vllm_additional_config :94-117), enable_dp_attention false (:113), async_scheduling "
        f"(:114); departs: {NO_XLA_FLAGS} (:52-80, 131)",
        "2026-07-15",
        over_rl_yml(
            rollout_tensor_parallelism=8,
            hbm_utilization_vllm=0.8,
            scan_layers=True,
            vllm_hf_overrides=VLLM_OWN_MODEL,
            rollout_model_impl="flax_nnx",
        ),
    ),
    # docs/tutorials/posttraining/rl_on_multi_host.md:22, 184 (v5p-128, rollout_tensor_parallelism
    # =8); scan_layers=true and remat full: tests/end_to_end/tpu/llama3.1/70b/
    # test_llama3.1_70b_rl.sh (2026-08-19)
    Cell(
        "llama3.1-70b",
        "v5p-128",
        "4x4x4",
        "docs/tutorials/posttraining/rl_on_multi_host.md:22,184 with rl.yml's defaults: AdamW, "
        "vLLM's own Llama (no vllm_hf_overrides, :179-185)",
        "2026-07-07",
        over_rl_yml(
            rollout_tensor_parallelism=8, scan_layers=True, vllm_hf_overrides=VLLM_OWN_MODEL
        ),
    ),
    # rollout_tensor_parallelism=4, hbm_utilization_vllm=0.55, chips_per_vm=4, scan_layers=True;
    # its vllm_decode steps use ici 4 x 2 x 2 = 16 devices: a v5p-32 (accelerator_to_spec_map.py
    # :170, 16 devices)
    Cell(
        "qwen3-30b-a3b-base",
        "v5p-32",
        "2x2x4",
        "tests/end_to_end/tpu/qwen3/30b/test_qwen3_rl.sh: MaxTextForCausalLM (:80), rl.yml's "
        "async_scheduling and enable_dp_attention; AdamW: its opt_type=sgd (:89) is not read by "
        "train_rl (utils_rl.py:587-645 builds optax.adamw); departs: "
        f"{ADAPTER_CONFIG}, the script's log_config false (:81)",
        "2026-08-18",
        over_rl_yml(rollout_tensor_parallelism=4, hbm_utilization_vllm=0.55, scan_layers=True),
    ),
    # TPU_TYPE tpu7x-128, chips_per_vm=8 (JAX devices: 2 per chip), rollout_data_parallelism=16 x
    # rollout_tensor_parallelism=4 (64 sampler devices), hbm_utilization_vllm=0.75,
    # scan_layers=True
    Cell(
        "qwen3-30b-a3b-base",
        "tpu7x-128",
        "4x4x4",
        f"{SCRIPTS}/run_qwen3_30b_rl.sh (xpk create-pathways, --num-slices=1): AdamW, "
        "async_scheduling (:97), enable_dp_attention (:123), MaxTextForCausalLM (:137); departs: "
        f"{NO_XLA_FLAGS} (:52-80, 151); {ADAPTER_CONFIG}: its enable_dp_attention follows the "
        "flag (true) where the script's maxtext_config says false (:138), one setting rendering "
        "both",
        "2026-07-15",
        over_rl_yml(
            rollout_tensor_parallelism=4,
            hbm_utilization_vllm=0.75,
            scan_layers=True,
            enable_dp_attention=True,
        ),
    ),
)
TUTORIAL_CELL = CELLS[0]


def cells_of(model_name: str) -> tuple[Cell, ...]:
    """The model's cells, in catalogue order."""
    return tuple(c for c in CELLS if c.model_name == model_name)


def find_cell(model_name: str, tpu_type: str) -> Cell | None:
    """The model's cell on this TPU type, if the catalogue has one."""
    return next((c for c in cells_of(model_name) if c.tpu_type == tpu_type), None)
