"""MaxText 0.2.4's trainer mesh with whole slices per role (num_trainer_slices and
num_samplers_slices both positive), as train_rl builds it before its first step: the training pod
fails with MaxText's own error once the Pathways backend's slices are up (its devices are
theirs). In 0.2.4 it always fails: the trainer's config keeps num_slices -1, so the mesh's
devices per slice are negative, and no ICI axes fill them.

Kept apart from the product's rules (tpu_rl.settings.cell_rules, grpo_rules): the sandbox runs
MaxText's steps as the source has them, so a rule the product lacks shows as a failed pod.

Source: AI-Hypercomputer/maxtext at maxtext-v0.2.4 (538fe7a):
- trainers/post_train/rl/train_rl.py:693-697 setup_configs_and_devices, then 709-715
  create_models_and_meshes (main 840, rl_train 688).
- utils/model_creation_utils.py:691-732, setup_configs_and_devices with trainer and sampler
  slices: "Not enough slices for trainer and samplers" (698-699); the trainer's config is rebuilt
  with ici_fsdp_parallelism = trainer devices per slice // ici_tensor_parallelism (709-722:
  ValueErrors when tensor does not divide them, or an explicit fsdp x tensor is not them),
  ici_tensor_parallelism kept, every other flag as given (ici_expert_parallelism too), and the
  keyword num_slices = num_trainer_slices (724-732), which configs/pyconfig.py:576 hands to
  RLConfig, whose after-validator sets num_slices = -1 whenever trainer slices are given
  (configs/types.py:4589-4590, 4653).
- utils/model_creation_utils.py:764 the reference model on the trainer's mesh first
  (from_pretrained 925 -> create_nnx_abstract_model 586 -> _create_model 557 -> from_config 525
  -> utils/maxtext_utils.py:2452 get_mesh_from_config -> create_device_mesh): devices per slice
  = len(devices) // config.num_slices (maxtext_utils.py:2163, 2181-2183), the ICI axes
  (configs/types.py:4322-4340: fsdp, tensor, expert and the others, 1 by default in
  configs/base.yml:672-684) filled for them by utils/max_utils.py:461-482
  fill_unspecified_mesh_axes (maxtext_utils.py:2209).
- JAX devices per chip (utils/accelerator_to_spec_map.py:35-42, 136-141, 167-172: tpu7x "two
  cores per chip", v6e one core, v5p one megacore), by the Pathways server's instance type
  (`--instance_type=<tpuv6e|tpuv5|tpu7x>:<topology>`, xpk system_characteristics.py
  pathways_tpu_version).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from sandbox.pod_scripts import PodScript, exit, log
from sandbox.workloads import STDERR_NOISE, absl

SRC = "/deps/src/maxtext"
DEVICES_PER_CHIP = {"tpuv6e": 1, "tpuv5": 1, "tpu7x": 2}
# configs/base.yml:674, 680, 684 (ici_fsdp_parallelism -1, tensor 1, expert 1); rl.yml:22-23
DEFAULTS = {
    "ici_fsdp_parallelism": -1,
    "ici_tensor_parallelism": 1,
    "ici_expert_parallelism": 1,
    "num_trainer_slices": -1,
    "num_samplers_slices": -1,
}
FLAGS = tuple(DEFAULTS)
_ARG = re.compile(r"^--(instance_count|instance_type)=(\S+)$")
# The frames of the failing call, innermost last: (file under SRC, line, function)
ENTRY = (
    ("trainers/post_train/rl/train_rl.py", 840, "main"),
    ("trainers/post_train/rl/train_rl.py", 688, "rl_train"),
)
SETUP = (
    *ENTRY,
    ("trainers/post_train/rl/train_rl.py", 693, "_rl_train_impl"),
)
TRAINER_MESH = (
    *ENTRY,
    ("trainers/post_train/rl/train_rl.py", 709, "_rl_train_impl"),
    ("utils/model_creation_utils.py", 764, "create_models_and_meshes"),
    ("utils/model_creation_utils.py", 925, "from_pretrained"),
    ("utils/model_creation_utils.py", 586, "create_nnx_abstract_model"),
    ("utils/model_creation_utils.py", 557, "_create_model"),
    ("utils/model_creation_utils.py", 525, "from_config"),
    ("utils/maxtext_utils.py", 2452, "get_mesh_from_config"),
    ("utils/maxtext_utils.py", 2209, "create_device_mesh"),
)
# RLConfig's num_slices whenever trainer slices are given (configs/types.py:4653)
RL_NUM_SLICES = -1


class MaxTextError(Exception):
    """What train_rl raises: its frames (innermost last), exception type and message."""

    def __init__(self, frames: tuple[tuple[str, int, str], ...], kind: str, message: str) -> None:
        super().__init__(message)
        self.frames, self.kind = frames, kind

    def traceback(self) -> str:
        """Python's report of the uncaught exception, as the pod log shows it."""
        lines = [f'  File "{SRC}/{path}", line {line}, in {fn}' for path, line, fn in self.frames]
        return "\n".join(["Traceback (most recent call last):", *lines, f"{self.kind}: {self}"])


def backend_slices(jobset: Mapping[str, Any]) -> list[int]:
    """JAX devices of each slice the Pathways backend serves: its resource manager's
    --instance_count slices of --instance_type's topology ([] when it names none)."""
    args = {
        m.group(1): m.group(2)
        for job in jobset.get("spec", {}).get("replicatedJobs") or []
        for c in job["template"]["spec"]["template"]["spec"].get("containers") or []
        for a in c.get("args") or []
        if (m := _ARG.match(a))
    }
    kind, _, topology = args.get("instance_type", "").partition(":")
    if kind not in DEVICES_PER_CHIP or not re.fullmatch(r"\d+(x\d+)+", topology):
        return []
    chips = math.prod(int(d) for d in topology.split("x"))
    return [chips * DEVICES_PER_CHIP[kind]] * int(args.get("instance_count", "1"))


def fill_unspecified_mesh_axes(
    values: list[int], target: int, frames: tuple[tuple[str, int, str], ...]
) -> None:
    """max_utils.py:461-482 on ICI axes; raises its AssertionError (the f-strings' line
    continuations keep the next line's indent)."""
    if -1 in values:
        if values.count(-1) != 1:
            raise MaxTextError(
                (*frames, ("utils/max_utils.py", 464, "fill_unspecified_mesh_axes")),
                "AssertionError",
                "Found unspecified values (-1) for more than one ICI      parallelism axis. "
                "At most one axis can be unspecified.",
            )
        determined = target / math.prod(values) * -1
        if not (determined >= 1 and determined.is_integer()):
            raise MaxTextError(
                (*frames, ("utils/max_utils.py", 471, "fill_unspecified_mesh_axes")),
                "AssertionError",
                "Unspecified value unable to be determined with the given      ICI parallelism "
                "values",
            )
        values[values.index(-1)] = int(determined)
    if math.prod(values) != target:
        raise MaxTextError(
            (*frames, ("utils/max_utils.py", 479, "fill_unspecified_mesh_axes")),
            "AssertionError",
            f"Number of devices per slice {target} does not match the product of the ICI "
            f"parallelism {math.prod(values)}",
        )


def multi_slice_meshes(flags: Mapping[str, str], slices: list[int]) -> None:
    """setup_configs_and_devices' multi-slice branch and the trainer's mesh
    (model_creation_utils.py:691-732, 764); raises MaxTextError where MaxText raises. One slice
    (both counts -1) is not modelled here."""
    given = {name: int(flags.get(name, default)) for name, default in DEFAULTS.items()}
    trainers, samplers = given["num_trainer_slices"], given["num_samplers_slices"]
    if trainers <= 0 or samplers <= 0:
        return
    if len(slices) < trainers + samplers:
        raise MaxTextError(
            (*SETUP, ("utils/model_creation_utils.py", 699, "setup_configs_and_devices")),
            "ValueError",
            "Not enough slices for trainer and samplers",
        )
    devices = sum(slices[:trainers])
    per_slice = devices // trainers
    tp, fsdp = given["ici_tensor_parallelism"], per_slice
    if tp > 1:
        if per_slice % tp:
            raise MaxTextError(
                (*SETUP, ("utils/model_creation_utils.py", 714, "setup_configs_and_devices")),
                "ValueError",
                f"trainer_devices_per_slice ({per_slice}) must be divisible by tensor "
                f"parallelism ({tp})",
            )
        explicit = given["ici_fsdp_parallelism"]
        if explicit != -1 and explicit * tp != per_slice:
            raise MaxTextError(
                (*SETUP, ("utils/model_creation_utils.py", 718, "setup_configs_and_devices")),
                "ValueError",
                f"ici_fsdp_parallelism ({explicit}) * ici_tensor_parallelism ({tp}) must equal "
                f"devices_per_slice ({per_slice})",
            )
        fsdp = per_slice // tp
    axes = [fsdp, tp, given["ici_expert_parallelism"]]
    fill_unspecified_mesh_axes(axes, devices // RL_NUM_SLICES, TRAINER_MESH)


def refused_script(flags: Mapping[str, str], backend: Mapping[str, Any] | None) -> PodScript | None:
    """The training pod's script when MaxText cannot mesh its trainer slices on the backend's
    (`flags`: the pod's FLAGS as given; `backend`: its Pathways JobSet, None when there is
    none): startup noise, setup_configs_and_devices' multi-slice line (max_logging.log
    at model_creation_utils.py:692), train_rl's traceback, exit 1; else None."""
    if backend is None:
        return None
    try:
        multi_slice_meshes(flags, backend_slices(backend))
    except MaxTextError as err:
        multislice = absl("I", "Running with Multislice", "model_creation_utils.py:692")
        return PodScript([log(STDERR_NOISE), log(multislice), log(f"{err.traceback()}\n"), exit(1)])
    return None
