"""The catalogue's cells: one model on one TPU type and topology, with the trainer mesh, rollout
parallelism and vLLM memory share of the public run or script it follows, and that source's date.

A cell fills the settings a run leaves unset (tpu_rl.settings.run_settings); validation checks
any mesh, a cell's or a user's, with MaxText's own rules (tpu_rl.settings.grpo_rules).
Paths are AI-Hypercomputer/maxtext's at tag maxtext-v0.2.4 (commit 538fe7a, 2026-08-21); a date
is the cited file's last commit at that tag. A cell whose source gives no TPU shape or mesh takes
rl.yml's defaults (src/maxtext/configs/post_train/rl.yml:19-27, 166: fractions 0.5/0.5,
rollout_tensor_parallelism 1, hbm_utilization_vllm 0.72) and the trainer's default mesh (FSDP
over all its chips); those defaults are named in the cell's `follows`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tpu_rl.catalogue.models import MODELS, Model
from tpu_rl.tpu import TpuGeneration, generation_for

# The MaxText image every cell runs: the tutorial's, MaxText 0.2.4's post-training image. No
# public digest of it is known (searched 2026-12-05: MaxText at maxtext-v0.2.4, its RL scripts,
# tutorials and end-to-end tests, the Pathways and GKE docs): a cell pins its tag, as the
# tutorial does. The RL scripts run an image the user builds (`DOCKER_IMAGE`, "the Docker image
# you pushed"), so none of them publishes a MaxText digest.
MAXTEXT_IMAGE = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.4"


@dataclass(frozen=True)
class Cell:
    """One model on one TPU slice shape, and the run it follows."""

    model_name: str
    tpu_type: str
    topology: str
    follows: str  # the public run or script, with what it sets
    date: str  # that source's date
    ici_tensor_parallelism: int = 1
    ici_expert_parallelism: int = 1
    ici_fsdp_parallelism: int = -1
    rollout_tensor_parallelism: int = 1
    rollout_expert_parallelism: int = 1
    hbm_utilization_vllm: float = 0.72
    trainer_devices_fraction: float = 0.5
    sampler_devices_fraction: float = 0.5
    scan_layers: bool = False
    # the source ran it as a Pathways workload (every run here runs a Pathways backend)
    pathways: bool = True
    image: str = MAXTEXT_IMAGE
    # images pinned by digest in the cell's source, and where (a record: the run's images are
    # its settings, tpu_rl.settings.images); empty where the source publishes none
    known_good_images: tuple[str, ...] = ()
    images_source: str = ""

    @property
    def model(self) -> Model:
        return MODELS[self.model_name]

    @property
    def generation(self) -> TpuGeneration:
        return generation_for(self.tpu_type)

    def settings(self) -> dict[str, Any]:
        """The run settings this cell and its model give."""
        return {
            "model_name": self.model_name,
            "hf_model_path": self.model.hf_id,
            "tokenizer_path": self.model.tokenizer,
            "chat_template_path": self.model.chat_template,
            "tpu_type": self.tpu_type,
            "topology": self.topology,
            "compute_type": self.generation.machine_type,
            "cloud_image_name": self.image,
            "scan_layers": self.scan_layers,
            "ici_tensor_parallelism": self.ici_tensor_parallelism,
            "ici_expert_parallelism": self.ici_expert_parallelism,
            "ici_fsdp_parallelism": self.ici_fsdp_parallelism,
            "rollout_tensor_parallelism": self.rollout_tensor_parallelism,
            "rollout_expert_parallelism": self.rollout_expert_parallelism,
            "hbm_utilization_vllm": self.hbm_utilization_vllm,
            "trainer_devices_fraction": self.trainer_devices_fraction,
            "sampler_devices_fraction": self.sampler_devices_fraction,
        }


SCRIPTS = "src/maxtext/trainers/post_train/rl/scripts"
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
        ici_tensor_parallelism=2,
        ici_expert_parallelism=4,
        rollout_tensor_parallelism=4,
        hbm_utilization_vllm=0.7,
    ),
    # TPU_TYPE v6e-32, chips_per_vm=4, ici_tensor_parallelism=2, rollout_data_parallelism=8 x
    # rollout_tensor_parallelism=2 (16 sampler chips), hbm_utilization_vllm=0.5, scan_layers=False
    Cell(
        "gemma4-e4b",
        "v6e-32",
        "4x8",
        f"{SCRIPTS}/run_gemma4_e4b_rl.sh (xpk create-pathways, --num-slices=1)",
        "2026-07-17",
        ici_tensor_parallelism=2,
        rollout_tensor_parallelism=2,
        hbm_utilization_vllm=0.5,
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
        "docs/tutorials/posttraining/rl.md:21 with rl.yml's defaults",
        "2026-06-21",
        pathways=False,  # train_rl on the TPU VM itself (rl.md:112-117)
    ),
    # the same on v5p-8: one VM of 4 chips, so trainer and sampler share them (model_creation_
    # utils.py:671-690 splits only across 2 VMs or more)
    Cell(
        "llama3.1-8b",
        "v5p-8",
        "2x2x1",
        "docs/tutorials/posttraining/rl.md:21 with rl.yml's defaults",
        "2026-06-21",
        pathways=False,  # train_rl on the TPU VM itself (rl.md:112-117)
    ),
    # TPU_TYPE v5p-64, chips_per_vm=4, rollout_data_parallelism=2 x rollout_tensor_parallelism=8
    # (16 sampler chips), hbm_utilization_vllm=0.8; scan_layers=true:
    # tests/end_to_end/tpu/gpt_oss/20b/test_gpt_oss_rl.sh (2026-08-18)
    Cell(
        "gpt-oss-20b",
        "v5p-64",
        "2x4x4",
        f"{SCRIPTS}/run_gptoss_20b_rl.sh (xpk create-pathways, --num-slices=1)",
        "2026-07-15",
        rollout_tensor_parallelism=8,
        hbm_utilization_vllm=0.8,
        scan_layers=True,
    ),
    # docs/tutorials/posttraining/rl_on_multi_host.md:22, 184 (v5p-128, rollout_tensor_parallelism
    # =8); scan_layers=true and remat full: tests/end_to_end/tpu/llama3.1/70b/
    # test_llama3.1_70b_rl.sh (2026-08-19)
    Cell(
        "llama3.1-70b",
        "v5p-128",
        "4x4x4",
        "docs/tutorials/posttraining/rl_on_multi_host.md:22,184 with rl.yml's defaults",
        "2026-07-07",
        rollout_tensor_parallelism=8,
        scan_layers=True,
    ),
    # rollout_tensor_parallelism=4, hbm_utilization_vllm=0.55, chips_per_vm=4, scan_layers=True;
    # its vllm_decode steps use ici 4 x 2 x 2 = 16 devices: a v5p-32 (accelerator_to_spec_map.py
    # :170, 16 devices)
    Cell(
        "qwen3-30b-a3b-base",
        "v5p-32",
        "2x2x4",
        "tests/end_to_end/tpu/qwen3/30b/test_qwen3_rl.sh",
        "2026-08-18",
        rollout_tensor_parallelism=4,
        hbm_utilization_vllm=0.55,
        scan_layers=True,
    ),
    # TPU_TYPE tpu7x-128, chips_per_vm=8 (JAX devices: 2 per chip), rollout_data_parallelism=16 x
    # rollout_tensor_parallelism=4 (64 sampler devices), hbm_utilization_vllm=0.75,
    # scan_layers=True
    Cell(
        "qwen3-30b-a3b-base",
        "tpu7x-128",
        "4x4x4",
        f"{SCRIPTS}/run_qwen3_30b_rl.sh (xpk create-pathways, --num-slices=1)",
        "2026-07-15",
        rollout_tensor_parallelism=4,
        hbm_utilization_vllm=0.75,
        scan_layers=True,
    ),
)
TUTORIAL_CELL = CELLS[0]
# The settings a cell gives (model_name chooses the cell, with tpu_type).
CELL_SETTINGS = tuple(name for name in TUTORIAL_CELL.settings() if name != "model_name")


def cells_of(model_name: str) -> tuple[Cell, ...]:
    """The model's cells, in catalogue order."""
    return tuple(c for c in CELLS if c.model_name == model_name)


def find_cell(model_name: str, tpu_type: str) -> Cell | None:
    """The model's cell on this TPU type, if the catalogue has one."""
    return next((c for c in cells_of(model_name) if c.tpu_type == tpu_type), None)
