"""MaxText's own verdict on train_rl command lines: `python -m tools.maxtext_judge.judge
CASES.json VERDICTS.json [--cache-dir DIR]`, in `.venv-maxtext` only (`make test-maxtext`
builds it from requirements-maxtext.lock; it imports MaxText, JAX and libtpu, never the product).

Each case is one run's train_rl flags as the product renders them, the TPU type and the number
of slices. The judge runs what train_rl runs before its first step, with MaxText's own code:
- config: `model_creation_utils.setup_configs_and_devices` (train_rl.py:693-697) on rl.yml with
  the flags: pyconfig and RLConfig's validation, and the trainer/sampler split (single slice:
  model_creation_utils.py:671-690; trainer and sampler slices: 691-748, the configs rebuilt);
- trainer_mesh: `maxtext_utils.get_mesh_from_config` on the trainer's devices, as from_pretrained
  builds it (model_creation_utils.py:764 -> maxtext_utils.py:2452);
- sampler_mesh: `create_device_mesh` on the sampler's devices (model_creation_utils.py:770);
- rollout: train_rl.py's `get_rollout_kwargs_for_parallelism` on the sampler's device count
  (train_rl.py:553; its source is compiled from train_rl.py, whose imports need Tunix and vLLM);
- compile (cases that ask for it): MaxText's train step ahead of time on the trainer's mesh, with
  train_compile.py's own functions (get_shaped_inputs, get_functional_train_with_signature,
  jit_and_compile) for a tiny model of the run's architecture (its model config, with few layers
  and small widths: TINY), memoised per (TPU type, slices, mesh, model).
The devices are the TPU's own descriptions from libtpu (`get_topology_desc`, as train_compile.py
:69-93 gets them for `compile_topology`): their coordinates, cores and slice indices are the
slice's, so mesh creation applies the physical torus rule (jax mesh_utils) as on the TPUs, and
a two-slice topology gives each device its `slice_index`. One slice's descriptions carry no
`slice_index`: the split reads it only with trainer and sampler slices, where it is 0 here.

Versions: the product's image runs MaxText 0.2.4 (tpu_post_training:0.2.4); the lock pins the
PyPI wheel maxtext==0.2.4, whose configs/types.py, utils/model_creation_utils.py,
utils/maxtext_utils.py, utils/max_utils.py, configs/base.yml, post_train/rl.yml and
trainers/post_train/rl/train_rl.py equal the maxtext-v0.2.4 tag's (538fe7a). PyPI's 0.2.5 has the
same multi-slice path (model_creation_utils.py setup_configs_and_devices, byte for byte but the
rollout function moved into it from train_rl.py) and the same `num_slices = 1 if
num_trainer_slices == -1 else -1` (configs/types.py:5935 there, 4653 here); its
create_device_mesh reads the config's derived ici/dcn lists instead of rebuilding them. JAX
0.12.1 with libtpu 0.0.52 (jax[tpu] 0.12.1 asks for 0.0.53, not on PyPI when the lock was made;
0.0.52 describes and compiles every topology here).

Output: {"versions": {...}, "verdicts": {case id: {"ok", "stage", "error", "where",
"trainer_mesh", "sampler_mesh", "rollout", "compiled", "seconds"}}}: `stage` is where MaxText
refused (None when it accepted), `where` the innermost MaxText or JAX line that raised.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any
from unittest import mock

STAGES = ("config", "trainer_mesh", "sampler_mesh", "rollout", "compile")
# A tiny model of each architecture family (its decoder_block): the model config's own structure
# (heads, experts, layer pattern), few layers and small widths, so one compile takes seconds.
TINY_WIDTHS = (
    "override_model_config=true",
    "base_emb_dim=256",
    "base_mlp_dim=256",
    "base_moe_mlp_dim=128",
    "head_dim=32",
    "vocab_size=1024",
)
TINY = {
    "gemma4": ("base_num_decoder_layers=2", "global_head_dim=64"),
    "gemma4_small": (
        "base_num_decoder_layers=4",
        "global_head_dim=64",
        "num_kv_shared_layers=2",
        "hidden_size_per_layer_input=32",
        "vocab_size_per_layer_input=1024",
    ),
    "gpt_oss": ("base_num_decoder_layers=2",),
}
TINY_LAYERS = "base_num_decoder_layers=2"
# train_rl flags the compile's MaxText config takes as the run gives them
COMPILE_FLAGS = (
    "model_name",
    "scan_layers",
    "remat_policy",
    "mu_dtype",
    "grad_dtype",
    "weight_dtype",
    "allow_split_physical_axes",
    "learning_rate",
)


def _quiet_environment(cache_dir: Path) -> None:
    """JAX on CPU (libtpu only describes and compiles for the TPU), the persistent compile cache
    in `cache_dir`, and MaxText's optional Google Cloud clients stubbed (DECOUPLE_GCLOUD: its own
    switch, common/gcloud_stub.py; none is used before a step)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("DECOUPLE_GCLOUD", "TRUE")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # libtpu's one-process lock (/tmp/libtpu_lockfile) guards a TPU; here it only describes one,
    # and the tier runs two judges side by side
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = str(cache_dir)


class SliceZero:
    """A one-slice TPU description as the split reads it: `slice_index` 0, the rest the
    device's own."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self.slice_index = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.device, name)


class Judge:
    """MaxText's train_rl steps before training, on TPU device descriptions."""

    def __init__(self, cache_dir: Path) -> None:
        import jax
        import maxtext
        from jax.sharding import Mesh
        from maxtext.configs import pyconfig, types
        from maxtext.utils import accelerator_to_spec_map, maxtext_utils, model_creation_utils

        jax.config.update("jax_compilation_cache_dir", str(cache_dir))
        self.jax, self.Mesh, self.pyconfig, self.types = jax, Mesh, pyconfig, types
        self.spec_map, self.maxtext_utils = accelerator_to_spec_map, maxtext_utils
        self.creation = model_creation_utils
        self.package = Path(maxtext.__file__).parent
        self.cache_dir = cache_dir
        self.rollout_kwargs = self._train_rl_function("get_rollout_kwargs_for_parallelism")
        self.topologies: dict[tuple[str, int], list[Any]] = {}
        self.compiled: dict[tuple[Any, ...], str | Exception] = {}

    def _train_rl_function(self, name: str) -> Callable[..., Any]:
        """A function of train_rl.py compiled from its source, at its own file and lines."""
        path = self.package / "trainers/post_train/rl/train_rl.py"
        tree = ast.parse(path.read_text(), str(path))
        [node] = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
        namespace: dict[str, Any] = {}
        exec(compile(ast.Module([node], []), str(path), "exec"), namespace)
        return namespace[name]

    def devices(self, tpu_type: str, slices: int) -> list[Any]:
        """The TPU's device descriptions, as train_compile.py's get_topology_mesh gets them."""
        key = (tpu_type, slices)
        if key not in self.topologies:
            from jax.experimental.topologies import get_topology_desc

            spec = self.spec_map.get_system_characteristics(tpu_type)
            self.topologies[key] = list(
                get_topology_desc(
                    platform=spec.platform,
                    topology_name=spec.topology_name,
                    chip_config_name=spec.chip_config_name,
                    chips_per_host_bounds=spec.chips_per_host_bounds,
                    num_slices=slices,
                    wrap=spec.wrap,
                ).devices
            )
        return self.topologies[key]

    @contextmanager
    def _jax_devices(self, devices: list[Any]) -> Iterator[None]:
        with mock.patch.object(self.jax, "devices", return_value=devices):
            yield

    def verdict(self, case: dict[str, Any]) -> dict[str, Any]:
        """MaxText's verdict on one case: the stage that refused it and why, or its meshes."""
        started = time.monotonic()
        result: dict[str, Any] = {"ok": False, "stage": None, "error": None, "where": None}
        result.update(trainer_mesh=None, sampler_mesh=None, rollout=None, compiled=None)
        stage = "config"
        try:
            devices = self.devices(case["tpu_type"], case["slices"])
            listed = [d if hasattr(d, "slice_index") else SliceZero(d) for d in devices]
            rl_yml = self.package / "configs/post_train/rl.yml"
            argv = ["train_rl", str(rl_yml), *case["flags"], f"jax_cache_dir={self.cache_dir}"]
            with self._jax_devices(listed):
                trainer, sampler, trainer_devices, sampler_devices = (
                    self.creation.setup_configs_and_devices(argv, config_class=self.types.RLConfig)
                )
            trainer_devices = [getattr(d, "device", d) for d in trainer_devices]
            sampler_devices = [getattr(d, "device", d) for d in sampler_devices]
            stage = "trainer_mesh"
            mesh = self.maxtext_utils.get_mesh_from_config(trainer, trainer_devices)
            result["trainer_mesh"] = _shape(mesh.shape)
            stage = "sampler_mesh"
            devices_array = self.maxtext_utils.create_device_mesh(sampler, sampler_devices)
            rollout = self.Mesh(devices_array, sampler.mesh_axes)  # model_creation_utils.py:771
            result["sampler_mesh"] = _shape(rollout.shape)
            stage = "rollout"
            result["rollout"] = self.rollout_kwargs(sampler, len(sampler_devices))
            if case.get("compile"):
                stage = "compile"
                result["compiled"] = self.compile(case, trainer, mesh, devices)
        except Exception as err:  # MaxText's refusal, whatever its kind
            result.update(stage=stage, error=_error(err), where=_where(err))
        else:
            result["ok"] = True
        result["seconds"] = round(time.monotonic() - started, 3)
        return result

    def compile(self, case: dict[str, Any], trainer: Any, mesh: Any, devices: list[Any]) -> str:
        """MaxText's train step compiled ahead of time on the trainer's mesh, for a tiny model of
        the run's architecture; raises where XLA or MaxText refuses. Returns the memory use."""
        given = dict(flag.split("=", 1) for flag in case["flags"])
        ids = tuple(d.id for d in mesh.devices.flat)
        key = (
            case["tpu_type"],
            case["slices"],
            ids,
            tuple(mesh.shape.items()),
            given["model_name"],
        )
        if key not in self.compiled:
            try:
                self.compiled[key] = self._compile(case, trainer, mesh, devices, given)
            except Exception as err:  # the same mesh and model fail the same way again
                self.compiled[key] = err
        if isinstance(self.compiled[key], Exception):
            raise self.compiled[key]
        return self.compiled[key]

    def _compile(
        self,
        case: dict[str, Any],
        trainer: Any,
        mesh: Any,
        devices: list[Any],
        given: dict[str, str],
    ) -> str:
        from flax.linen import partitioning as nn_partitioning
        from maxtext.trainers.pre_train import train, train_compile
        from maxtext.utils import sharding

        family = str(getattr(trainer.decoder_block, "value", trainer.decoder_block))
        argv = [
            "train_compile",
            str(self.package / "configs/base.yml"),
            *(f"{name}={given[name]}" for name in COMPILE_FLAGS if name in given),
            *TINY_WIDTHS,
            *TINY.get(family, (TINY_LAYERS,)),
            f"ici_tensor_parallelism={trainer.ici_tensor_parallelism}",
            f"ici_expert_parallelism={trainer.ici_expert_parallelism}",
            "ici_fsdp_parallelism=-1",  # the mesh is the trainer's, built above
            f"compile_topology={case['tpu_type']}",
            f"compile_topology_num_slices={case['slices']}",
            "per_device_batch_size=1",
            "max_target_length=128",
            "attention=dot_product",
            "dataset_type=synthetic",
            "enable_checkpointing=false",
            "use_multimodal=false",
            "skip_jax_distributed_system=true",
            f"base_output_directory={self.cache_dir / 'out'}",
            "run_name=judge",
            f"jax_cache_dir={self.cache_dir}",
        ]
        with self._jax_devices(devices):
            config = self.pyconfig.initialize(argv)
        shaped_args, shaped_kwargs, state_shardings, _, model = train_compile.get_shaped_inputs(
            mesh, config
        )
        params, state_shardings = sharding.maybe_update_params_sharding_with_opt(
            config, state_shardings
        )
        state_in = sharding.build_zero1_input_state_mesh_shardings(config, state_shardings, params)
        data = sharding.get_input_data_sharding(config, mesh)
        step, shard_in, shard_out, static, donate = (
            self.maxtext_utils.get_functional_train_with_signature(
                train.train_step, data, state_in, model, config, params
            )
        )
        compiled = train_compile.jit_and_compile(
            step,
            shaped_args,
            shaped_kwargs,
            mesh,
            shard_in,
            shard_out,
            static,
            donate,
            config,
            nn_partitioning.axis_rules(config.logical_axis_rules),
        )
        memory = compiled.memory_analysis()
        return f"{family}: {memory.temp_size_in_bytes + memory.argument_size_in_bytes} bytes"


def _shape(shape: Any) -> dict[str, int]:
    """A mesh's axes of more than one device."""
    return {name: int(size) for name, size in dict(shape).items() if size > 1}


def _error(err: BaseException) -> str:
    """The exception as Python's traceback ends: `Kind: message`, whitespace runs folded."""
    return " ".join(f"{type(err).__name__}: {err}".split())


def _where(err: BaseException) -> str | None:
    """The innermost MaxText or JAX frame of the exception: `maxtext/utils/max_utils.py:479`."""
    found = None
    for frame in traceback.extract_tb(err.__traceback__):
        for package in ("maxtext", "jax", "pydantic"):
            marker = f"/site-packages/{package}/"
            if marker in frame.filename:
                found = f"{package}/{frame.filename.split(marker, 1)[1]}:{frame.lineno}"
    return found


def versions() -> dict[str, str]:
    """The versions the verdicts are MaxText's and JAX's at."""
    names = ("maxtext", "jax", "jaxlib", "libtpu", "flax", "pydantic")
    return {name: metadata.version(name) for name in names} | {"python": sys.version.split()[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", type=Path, help="JSON: {'cases': [{id, tpu_type, slices, ...}]}")
    parser.add_argument("verdicts", type=Path, help="where to write MaxText's verdicts")
    parser.add_argument("--cache-dir", type=Path, default=Path(".airflow/maxtext-judge"))
    args = parser.parse_args(argv)
    cache_dir = args.cache_dir.resolve()
    cache_dir.mkdir(parents=True, exist_ok=True)
    _quiet_environment(cache_dir)
    cases = json.loads(args.cases.read_text())["cases"]
    judge = Judge(cache_dir)
    verdicts = {case["id"]: judge.verdict(case) for case in cases}
    args.verdicts.write_text(json.dumps({"versions": versions(), "verdicts": verdicts}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
