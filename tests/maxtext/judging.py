"""The product's side of the MaxText judge tier: each case's settings, `validate`'s problems and
the train_rl flags the product renders (tpu_rl.jobs.maxtext_flags), written for MaxText's own
code to judge in `.venv-maxtext` (tools/maxtext_judge/judge.py, a subprocess: it imports MaxText
and JAX on Python 3.12, never the product); its verdicts are read back here.

Cases: every catalogue cell with one slice and with two (one trainer and one sampler slice, the
product's two-slice shape), each compiled ahead of time on its trainer's mesh; and GENERATED
settings drawn from the mesh settings' values around every cell (seeded, so each run judges the
same) with WITNESSES, one setting per rule validate learned from MaxText, config and meshes
only.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.cells import cell_conf
from tpu_rl.catalogue.cells import CELLS
from tpu_rl.jobs.maxtext_flags import TOKEN_FLAG, train_flags
from tpu_rl.layout import RunLayout
from tpu_rl.settings.run_settings import read_settings

REPO = Path(__file__).resolve().parents[2]
PYTHON_ENV = "TPU_RL_MAXTEXT_PYTHON"  # the judge venv's python (default .venv-maxtext's)
DEFAULT_PYTHON = REPO / ".venv-maxtext" / "bin" / "python"
CACHE = REPO / ".airflow" / "maxtext-judge"  # JAX's compile cache and the last run's files
# the shell gives train_rl the token's value (python_command); any text stands for it here
TOKEN = "hf_access_token=hf_judge"
TWO_SLICES = {"cluster_nodepool_count": 2, "num_trainer_slices": 1, "num_samplers_slices": 1}
GENERATED = 240
SEED = 59
# The mesh settings' values the generated cases draw from (paired ones together)
CHOICES: dict[str, tuple[Any, ...]] = {
    "ici_tensor_parallelism": (1, 2, 4, 8, -1),
    "ici_expert_parallelism": (1, 2, 4, -1),
    "ici_fsdp_parallelism": (-1, 1, 2, 4, 8, 16),
    "rollout_tensor_parallelism": (1, 2, 4, 8),
    "rollout_expert_parallelism": (1, 2),
    "allow_split_physical_axes": (True, False),
    "fractions": (
        (0.5, 0.5),
        (0.25, 0.75),
        (0.75, 0.25),
        (0.5, 0.25),
        (0.25, 0.5),
        (0.125, 0.875),
        (0.3, 0.5),
        (1.0, 1.0),
    ),
    "slices": ((1, -1, -1), (2, -1, -1), (2, 1, 1), (1, 1, 1), (2, 1, -1), (3, 2, 1)),
}
PAIRED = {
    "fractions": ("trainer_devices_fraction", "sampler_devices_fraction"),
    "slices": ("cluster_nodepool_count", "num_trainer_slices", "num_samplers_slices"),
}


class JudgeMissing(RuntimeError):
    """The judge venv's python is not there."""


def judge_python() -> Path:
    """The judge venv's python: $TPU_RL_MAXTEXT_PYTHON, else `.venv-maxtext/bin/python`."""
    python = Path(os.environ.get(PYTHON_ENV) or DEFAULT_PYTHON)
    if not (python.is_file() and os.access(python, os.X_OK)):
        raise JudgeMissing(
            f"the MaxText judge's python {python} does not exist: run `make test-maxtext` (it "
            "builds .venv-maxtext from requirements-maxtext.lock first), or point "
            f"{PYTHON_ENV} at a Python 3.12 that has MaxText 0.2.4, JAX and libtpu"
        )
    return python


@dataclass(frozen=True)
class Case:
    """One run's settings as the product validates and renders them."""

    id: str
    tpu_type: str
    slices: int
    flags: list[str]
    problems: list[str]  # validate's
    compile: bool = False
    changes: dict[str, Any] = field(default_factory=dict)  # a generated case's settings

    def to_judge(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tpu_type": self.tpu_type,
            "slices": self.slices,
            "flags": self.flags,
            "compile": self.compile,
        }


def render(case_id: str, conf: dict[str, Any], *, compile: bool = False) -> Case:
    """A case from a run's settings: validate's problems and the flags, whatever they say."""
    settings, problems = read_settings(conf)
    flags = train_flags(RunLayout(settings, "manual__judge", "maxtext-judge"))
    return Case(
        case_id,
        settings.tpu_type,
        settings.cluster_nodepool_count,
        [TOKEN if f == TOKEN_FLAG else f for f in flags],
        problems,
        compile,
    )


def cell_cases() -> list[Case]:
    """Every catalogue cell with one slice and with two, each compiled ahead of time."""
    return [
        render(
            f"{cell.model_name}@{cell.tpu_type}x{slices}",
            {**cell_conf(cell), **(TWO_SLICES if slices == 2 else {})},
            compile=True,
        )
        for cell in CELLS
        for slices in (1, 2)
    ]


def generated_cases(count: int = GENERATED, seed: int = SEED) -> list[Case]:
    """`count` settings around the cells: a cell's, with one to all of the mesh settings drawn
    from CHOICES (fewer changes keep more of them valid)."""
    rng = random.Random(seed)
    cases = []
    for i in range(count):
        cell = rng.choice(CELLS)
        drawn = rng.sample(list(CHOICES), rng.choice((1, 1, 2, 3, len(CHOICES))))
        changes: dict[str, Any] = {}
        for name in drawn:
            value = rng.choice(CHOICES[name])
            names = PAIRED.get(name, (name,))
            changes.update(zip(names, value if name in PAIRED else (value,), strict=True))
        shown = ",".join(f"{k}={v}" for k, v in changes.items())
        case_id = f"g{i:03d} {cell.model_name}@{cell.tpu_type} {shown}"
        case = render(case_id, {**cell_conf(cell), **changes})
        cases.append(dataclasses.replace(case, changes=changes))
    return cases


# One setting per rule validate learned from MaxText that it refuses by that rule alone
# (test_generated.LEARNED): the cell and its changes, judged with the generated ones.
WITNESSES = (
    ("gemma4-e4b", "v6e-32", TWO_SLICES),
    (
        "gemma4-26b",
        "v6e-32",
        {
            "ici_fsdp_parallelism": 2,
            "trainer_devices_fraction": 0.5,
            "sampler_devices_fraction": 0.25,
        },
    ),
    (
        "gemma4-e4b",
        "v6e-32",
        {"trainer_devices_fraction": 0.125, "sampler_devices_fraction": 0.875},
    ),
    ("gemma4-26b", "v6e-32", {"allow_split_physical_axes": False}),
)


def witness_cases() -> list[Case]:
    """WITNESSES as cases."""
    cases = []
    for n, (model, tpu_type, changes) in enumerate(WITNESSES):
        cell = next(c for c in CELLS if (c.model_name, c.tpu_type) == (model, tpu_type))
        shown = ",".join(f"{k}={v}" for k, v in changes.items())
        case = render(f"w{n} {model}@{tpu_type} {shown}", {**cell_conf(cell), **changes})
        cases.append(dataclasses.replace(case, changes=changes))
    return cases


def judge(python: Path, groups: list[list[Case]], workdir: Path) -> dict[str, Any]:
    """MaxText's verdicts on the cases, one judge process per group run side by side: {"versions":
    ..., "verdicts": {case id: verdict}}; raises with the judge's output when one fails."""
    CACHE.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # tools.maxtext_judge, not the product
    running = []
    for n, group in enumerate(groups):
        cases, out, log = (workdir / f"{name}-{n}.json" for name in ("cases", "verdicts", "log"))
        cases.write_text(json.dumps({"cases": [c.to_judge() for c in group]}))
        command = [str(python), "-m", "tools.maxtext_judge.judge", str(cases), str(out)]
        with log.open("w") as sink:
            process = subprocess.Popen(
                [*command, "--cache-dir", str(CACHE)],
                cwd=REPO,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        running.append((process, out, log))
    merged: dict[str, Any] = {"verdicts": {}}
    for process, out, log in running:
        if process.wait(timeout=1500) != 0:
            raise RuntimeError(f"the MaxText judge failed:\n{log.read_text()[-6000:]}")
        answer = json.loads(out.read_text())
        merged["versions"] = answer["versions"]
        merged["verdicts"].update(answer["verdicts"])
    return merged
