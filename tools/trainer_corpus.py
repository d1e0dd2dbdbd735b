"""Record the corpus of real GRPO runs: `make corpus`.

Runs the real trainer (sandbox/real_trainer/grpo_toy.py: Tunix's GRPOLearner on its toy model,
in `.venv-trainer`) once per entry of RUNS and writes `sandbox/corpus/<name>.json`: the command,
the versions and the seed that made it, the log lines the product reads (step, evaluation and
save lines, with their absl timestamps), every TensorBoard scalar of the run, the checkpoint
steps left on disk and how the process ended. Faults are the trainer's own (grpo_toy.py
--fault); a stall is the process stopped inside an update, recorded as still silent after
STALL_WATCH_S and then killed.

The runs are deterministic given their seed on one machine; another machine may round
differently in the last digits. `sandbox/trainer_corpus.py` reads the files.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "sandbox" / "corpus"
TRAINER = "sandbox/real_trainer/grpo_toy.py"
PYTHON = os.environ.get("TPU_RL_TRAINER_PYTHON", str(REPO / ".venv-trainer" / "bin" / "python"))
STALL_WATCH_S = 10.0  # a stalled process is recorded as silent this long, then killed
KEPT = re.compile(
    r"Train step \d+ training loss|Intermediate Eval \(step=|Pre RL Training:|Post RL Training:"
    r"|RL Training Completed|Finished saving checkpoint \(finalized tmp dir\)|Config param"
)
VERSIONS = ("google-tunix", "jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "tensorboardX")
BASE = {"steps": 40, "batch-size": 4, "num-generations": 4, "learning-rate": 3e-3, "beta": 0.04}


@dataclass(frozen=True)
class Run:
    """One corpus entry: grpo_toy.py's flags over BASE."""

    name: str
    flags: dict[str, object] = field(default_factory=dict)
    why: str = ""

    def settings(self) -> dict[str, object]:
        return {**BASE, **self.flags}


RUNS = (
    Run("base", {}, "MaxText rl.yml's beta 0.04, 4 generations, a rising reward"),
    Run("beta0", {"beta": 0.0}, "no KL term: the loss is the policy term alone"),
    Run("beta0.1", {"beta": 0.1}, "a larger KL term"),
    Run(
        "g2-b2-lr1e-3",
        {"num-generations": 2, "batch-size": 2, "learning-rate": 1e-3},
        "the smallest group: empty completions swing the loss negative",
    ),
    Run("g8-b2", {"num-generations": 8, "batch-size": 2}, "a larger group"),
    Run("lr1e-2", {"learning-rate": 1e-2}, "a fast but healthy learning rate"),
    Run("lr1e-3", {"learning-rate": 1e-3}, "a slow learning rate: the reward barely moves"),
    Run("layers2", {"num-layers": 2}, "a deeper model"),
    Run("layers4", {"num-layers": 4}, "a deeper model still"),
    Run("tokens20", {"max-tokens": 20}, "longer completions"),
    Run("tokens4", {"max-tokens": 4}, "short completions"),
    Run("beta0-g2-seed1", {"beta": 0.0, "num-generations": 2, "seed": 1}, "beta 0, another seed"),
    Run("long-seed2", {"steps": 100, "seed": 2, "log-period": 20}, "a longer run, another seed"),
    Run(
        "fault-lr-collapse",
        {"fault": "lr_collapse", "fault-step": 1},
        "learning rate 1000x (3.0): the policy collapses from the first updates",
    ),
    Run(
        "fault-overflow",
        {"fault": "overflow", "fault-step": 15},
        "from batch 15 each reward is near float64's largest: GRPO's advantages overflow to "
        "nan, so does the loss",
    ),
    Run(
        "fault-stall",
        {"fault": "stall", "fault-step": 15},
        "the process stops inside update 15 (SIGSTOP), alive and silent",
    ),
    Run(
        "fault-kl-blowup",
        {"fault": "kl_blowup", "fault-step": 15},
        "the learning rate turns -100x at update 15 (gradient ascent, a sign bug): the policy "
        "leaves the reference and its reward",
    ),
)


def command(run: Run, out: str) -> list[str]:
    flags = [f"--{k}={v}" for k, v in run.settings().items()]
    return [PYTHON, TRAINER, f"--base-output-directory={out}", "--run-name=rl", *flags]


def versions() -> dict[str, str]:
    probe = (
        "import importlib.metadata as m, json, platform; "
        f"print(json.dumps({{n: m.version(n) for n in {list(VERSIONS)!r}}} | "
        "{'python': platform.python_version()}))"
    )
    return json.loads(subprocess.check_output([PYTHON, "-c", probe], text=True))


def record(run: Run, tools: dict[str, str]) -> dict[str, object]:
    """Run the trainer once and return the corpus entry."""
    work = tempfile.mkdtemp(prefix=f"corpus-{run.name}-")
    out = os.path.join(work, "out")
    cmd = command(run, out)
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONHASHSEED": "0"}
    started, t0 = datetime.now(UTC), time.monotonic()
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: list[str] = []
    last_output = [time.monotonic()]

    def read() -> None:
        for line in proc.stdout or ():
            last_output[0] = time.monotonic()
            if KEPT.search(line):
                lines.append(line.rstrip("\n").replace(out, "gs://corpus/" + run.name))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    stalled_for = None
    while proc.poll() is None:
        time.sleep(0.5)
        silent = time.monotonic() - last_output[0]
        if _stopped(proc.pid) and silent >= STALL_WATCH_S:
            stalled_for = round(silent, 1)
            proc.send_signal(signal.SIGKILL)
    proc.wait()
    reader.join(5)
    entry = {
        "name": run.name,
        "why": run.why,
        "command": " ".join(["make", "corpus", f"RUN={run.name}", "#", *cmd[1:]]).replace(
            out, "<out>"
        ),
        "versions": tools,
        "settings": run.settings(),
        "seed": run.settings().get("seed", 0),
        "fault": (
            {"kind": run.flags["fault"], "step": run.flags.get("fault-step")}
            if "fault" in run.flags
            else None
        ),
        "started": started.isoformat(timespec="seconds"),
        "wall_s": round(time.monotonic() - t0, 1),
        "exit_code": proc.returncode,
        "stalled_for_s": stalled_for,
        "log": lines,
        "scalars": scalars(os.path.join(out, "rl", "tensorboard")),
        "saves": sorted(
            int(p.name)
            for p in Path(out, "rl", "checkpoints", "actor").glob("*")
            if p.name.isdigit()
        ),
    }
    shutil.rmtree(work, ignore_errors=True)
    return entry


def _stopped(pid: int) -> bool:
    """The process is stopped (state T in /proc/<pid>/stat)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
    except (OSError, IndexError):
        return False


def scalars(directory: str) -> dict[str, list[list[float]]]:
    """Every scalar of the run's event files, by tag: [[step, value], ...] in file order."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    found: dict[str, list[list[float]]] = {}
    for path in sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*"))):
        for event in EventFileLoader(path).Load():
            for value in event.summary.value:
                if value.WhichOneof("value") == "simple_value":
                    number = float(value.simple_value)
                elif value.HasField("tensor"):
                    number = float(tensor_util.make_ndarray(value.tensor))
                else:
                    continue
                found.setdefault(value.tag, []).append([int(event.step), _json_float(number)])
    return found


def _json_float(value: float) -> float | str:
    """JSON has no nan or inf: those are kept as the strings Python prints."""
    return value if value == value and abs(value) != float("inf") else repr(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="append", help="record only these (names in RUNS)")
    args = parser.parse_args(argv)
    if not Path(PYTHON).exists():
        print(f"{PYTHON} is missing: make venv-trainer first", file=sys.stderr)
        return 2
    wanted = [r for r in RUNS if not args.run or r.name in args.run]
    CORPUS.mkdir(parents=True, exist_ok=True)
    tools = versions()
    for run in wanted:
        entry = record(run, tools)
        path = CORPUS / f"{run.name}.json"
        path.write_text(json.dumps(entry, indent=1) + "\n")
        print(
            f"{run.name}: {len(entry['log'])} lines, exit {entry['exit_code']}, "
            f"{entry['wall_s']} s -> {path.relative_to(REPO)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
