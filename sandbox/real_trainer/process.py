"""The real trainer as a training pod's process: `grpo_toy.py` run by the trainer
venv's Python (`make venv-trainer`), attached to the pod's container (pod_scripts.attach).

Each pump hands the controller the process's new output (stdout and stderr merged, as a pod log
has them) and mirrors its local output folder into the sandbox's Cloud Storage as the pod (its
PodStorage), the way the trainer writes gs:// in production:

- a TensorBoard event file is uploaded whole each time it grew (tensorboardX's GCSRecordWriter
  re-uploads the whole file at each flush), up to its last whole record;
- an Orbax step is uploaded once its folder lost the `.orbax-checkpoint-tmp` suffix (the local
  save committed), in the order Orbax writes gs:// (orbax-checkpoint 0.12.3: sandbox.orbax_saves):
  `_CHECKPOINT_METADATA` first, each item's files with the item's `commit_success.txt` last in
  the item, `_CHECKPOINT_METADATA` again, the step's `commit_success.txt` last of all;
- a step Orbax deleted locally (max_to_keep) is deleted from the bucket, its commit file first.

No JAX here: the trainer runs in its own venv; this module runs in the sandbox's.
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import os
import queue
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sandbox.orbax_saves import COMMIT_FILE, STEP_METADATA, join
from sandbox.paths import REPO

PYTHON_ENV = "TPU_RL_TRAINER_PYTHON"  # the trainer venv's python (default .venv-trainer's)
JAX_CACHE_ENV = "TPU_RL_JAX_CACHE"  # the JAX compile cache the runs share
DEFAULT_PYTHON = REPO / ".venv-trainer" / "bin" / "python"
DEFAULT_JAX_CACHE = REPO / ".airflow" / "jax-cache"
GRPO_TOY = Path(__file__).with_name("grpo_toy.py")
FAULTS = ("none", "lr_collapse", "overflow", "stall", "kl_blowup")  # grpo_toy.py --fault
TMP_SUFFIX = ".orbax-checkpoint-tmp"
STEP_LINE = re.compile(r"Train step (\d+) training loss:")
KILLED = 128 + signal.SIGKILL  # a container's exit code after SIGKILL


class TrainerMissing(RuntimeError):
    """The trainer venv's python is not there."""


def trainer_python() -> Path:
    """The trainer venv's python: $TPU_RL_TRAINER_PYTHON, else `.venv-trainer/bin/python`."""
    python = Path(os.environ.get(PYTHON_ENV) or DEFAULT_PYTHON)
    if not (python.is_file() and os.access(python, os.X_OK)):
        raise TrainerMissing(
            f"the real trainer's python {python} does not exist: run `make venv-trainer` "
            f"(it builds .venv-trainer from requirements-trainer.lock), or point {PYTHON_ENV} "
            "at a python that has google-tunix and jax"
        )
    return python


@dataclass(frozen=True)
class RealTrainer:
    """Options of the real trainer (grpo_toy.py); None keeps the toy's own value (or, for
    `num_generations`, the pod's rl.num_generations flag)."""

    fault: str = "none"
    fault_step: int = 0
    # the fault strikes the run's first trainer process only: a resumed one trains healthily
    # (a transient fault, health_action=resume's case)
    first_attempt_only: bool = False
    beta: float | None = None
    learning_rate: float | None = None
    num_generations: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.fault not in FAULTS:
            raise ValueError(f"fault {self.fault!r}: one of {FAULTS}")

    def for_attempt(self, earlier_attempts: int) -> RealTrainer:
        """The options of a trainer process after `earlier_attempts` others of the same run."""
        if self.first_attempt_only and earlier_attempts:
            return dataclasses.replace(self, fault="none", fault_step=0)
        return self

    def poisoned_from(self) -> int | None:
        """The first step whose checkpoint holds the fault's weights (a stall poisons none)."""
        if self.fault in ("none", "stall"):
            return None
        return max(self.fault_step, 1) if self.fault != "lr_collapse" else 1

    def arguments(self) -> list[str]:
        """grpo_toy.py's flags for these options (not the pod's)."""
        given = {
            "--fault": self.fault if self.fault != "none" else None,
            "--fault-step": self.fault_step if self.fault != "none" else None,
            "--beta": self.beta,
            "--learning-rate": self.learning_rate,
            "--seed": self.seed,
        }
        return [f"{k}={v}" for k, v in given.items() if v is not None]


def trainer_command(
    python: Path,
    local_base: Path,
    run_name: str,
    *,
    steps: int,
    checkpoint_period: int,
    eval_interval: int,
    log_period: int,
    num_generations: int,
    options: RealTrainer,
) -> list[str]:
    """grpo_toy.py's command line for a pod's flags and the options."""
    generations = options.num_generations or num_generations
    return [
        str(python),
        str(GRPO_TOY),
        f"--base-output-directory={local_base}",
        f"--run-name={run_name}",
        f"--steps={steps}",
        f"--checkpoint-period={checkpoint_period}",
        f"--eval-interval={eval_interval}",
        f"--log-period={log_period}",
        f"--num-generations={generations}",
        *options.arguments(),
    ]


def trainer_env(cache_dir: Path | None = None) -> dict[str, str]:
    """The trainer's environment: this one without the sandbox venv's Python settings, JAX on
    CPU, a persistent compile cache shared by the runs (every computation cached)."""
    cache = cache_dir or Path(os.environ.get(JAX_CACHE_ENV) or DEFAULT_JAX_CACHE)
    cache.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(
        JAX_PLATFORMS="cpu",
        JAX_COMPILATION_CACHE_DIR=str(cache),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


class LocalProcess:
    """A child process in its own process group, its stdout and stderr merged and read on a
    thread into a queue as they come (partial lines too)."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own group: a kill reaches what it started
        )
        self._chunks: queue.Queue[str | None] = queue.Queue()
        self._drained = False
        self._reader = threading.Thread(target=self._read, name="trainer-output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        with self.popen.stdout as out:
            while chunk := out.read1(65536):
                self._chunks.put(decoder.decode(chunk))
        self._chunks.put(decoder.decode(b"", final=True))
        self._chunks.put(None)  # end of output

    def output(self) -> str:
        """The output that came since the last call."""
        parts = []
        while not self._drained:
            try:
                chunk = self._chunks.get_nowait()
            except queue.Empty:
                break
            if chunk is None:
                self._drained = True
            else:
                parts.append(chunk)
        return "".join(parts)

    def exit_code(self) -> int | None:
        """The exit code (a signal's as a container's, 128 + n) once the process ended and its
        output was all read by `output`; None before."""
        code = self.popen.poll()
        if code is None or not self._drained:
            return None
        return 128 - code if code < 0 else code

    def kill(self) -> None:
        """SIGKILL the process group (a SIGSTOPped process dies too) and reap the process."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait()
        self._reader.join(5)


Write = Callable[[str, bytes], None]
Delete = Callable[[str], None]


def _whole_records(data: bytes) -> int:
    """How many leading bytes of a TFRecord file are whole records (a writer may be mid-frame)."""
    end = 0
    while end + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, end)
        frame = 12 + length + 4
        if end + frame > len(data):
            break
        end += frame
    return end


def step_files(step_dir: Path) -> list[Path]:
    """A committed local Orbax step's files in the order Orbax writes them on gs://: the step's
    metadata, each item (sorted) with its commit file last, the step's other files, the metadata
    again, the step's commit file (sandbox.orbax_saves.orbax_step_uris)."""
    metadata, commit = step_dir / STEP_METADATA, step_dir / COMMIT_FILE
    ordered = [metadata]
    for item in sorted(p for p in step_dir.iterdir() if p.is_dir()):
        files = sorted(p for p in item.rglob("*") if p.is_file())
        item_commit = item / COMMIT_FILE
        ordered += [p for p in files if p != item_commit]
        ordered += [item_commit] if item_commit in files else []
    others = sorted(p for p in step_dir.iterdir() if p.is_file() and p not in (metadata, commit))
    return [*ordered, *others, metadata, commit]


class OutputMirror:
    """The trainer's local output folder `<local>/<run_name>/` mirrored to `<remote>/<run_name>/`
    (remote: the gs:// base_output_directory), through `write` and `delete` (the pod's)."""

    def __init__(
        self,
        local: Path,
        remote: str,
        write: Write,
        delete: Delete,
        on_commit: Callable[[int], None] = lambda step: None,
        on_delete: Callable[[int], None] = lambda step: None,
        restored: dict[tuple[str, int], list[str]] | None = None,
    ) -> None:
        """`restored`: the steps already on the bucket and put in `local` before the start
        ((role, step) -> their objects), not uploaded again, deleted when Orbax rotates them."""
        self.local, self.remote = local, remote
        self.write, self.delete = write, delete
        self.on_commit, self.on_delete = on_commit, on_delete
        self.events: dict[Path, int] = {}  # event file -> bytes uploaded
        # (role, step) -> objects uploaded
        self.steps: dict[tuple[str, int], list[str]] = dict(restored or {})

    def uri(self, path: Path) -> str:
        return join(self.remote, *path.relative_to(self.local).parts)

    def sync(self) -> None:
        """Upload what grew or committed since the last sync; delete what Orbax deleted."""
        self._sync_events(self.local / "tensorboard")
        checkpoints = self.local / "checkpoints"
        roles = (
            sorted(p for p in checkpoints.iterdir() if p.is_dir()) if checkpoints.is_dir() else []
        )
        for role in roles:
            self._sync_steps(role)
        for role_name, step in list(self.steps):  # a role folder gone altogether
            if not (checkpoints / role_name).is_dir():
                self._drop(role_name, step)

    def _sync_events(self, folder: Path) -> None:
        if not folder.is_dir():
            return
        for path in sorted(folder.iterdir()):
            if not path.name.startswith("events.out.tfevents.") or not path.is_file():
                continue
            if path.stat().st_size <= self.events.get(path, 0):
                continue
            data = path.read_bytes()
            whole = _whole_records(data)
            if whole > self.events.get(path, 0):
                self.write(self.uri(path), data[:whole])
                self.events[path] = whole

    def _sync_steps(self, role: Path) -> None:
        present = {int(p.name): p for p in role.iterdir() if p.name.isdigit() and p.is_dir()}
        for step in sorted(present):
            key = (role.name, step)
            if key in self.steps or not (present[step] / COMMIT_FILE).is_file():
                continue
            try:
                files = [(p, p.read_bytes()) for p in step_files(present[step])]
            except FileNotFoundError:
                continue  # deleted while listed: Orbax's rotation
            self.steps[key] = []
            for path, data in files:
                uri = self.uri(path)
                self.write(uri, data)
                if uri not in self.steps[key]:
                    self.steps[key].append(uri)
            self.on_commit(step)
        for role_name, step in list(self.steps):
            if role_name == role.name and step not in present:
                self._drop(role_name, step)

    def _drop(self, role: str, step: int) -> None:
        """A step deleted locally: its objects deleted, the commit file first."""
        uris = self.steps.pop((role, step))
        for uri in sorted(uris, key=lambda u: not u.endswith(f"/{step}/{COMMIT_FILE}")):
            self.delete(uri)
        self.on_delete(step)


class AttachedCommand:
    """A LocalProcess attached to a container (pod_scripts.AttachedProcess), its output folder
    mirrored at each pump; `on_line` sees each whole line of output; `on_end(code)` runs once
    (the code, or KILLED after a kill); the working folder is removed at the end."""

    def __init__(
        self,
        process: LocalProcess,
        mirror: OutputMirror | None = None,
        workdir: Path | None = None,
        on_line: Callable[[str], None] = lambda line: None,
        on_end: Callable[[int], None] = lambda code: None,
    ) -> None:
        self.process, self.mirror, self.workdir = process, mirror, workdir
        self.on_line, self.on_end = on_line, on_end
        self._partial = ""
        self._ended = False

    def pump(self) -> tuple[str, int | None]:
        text = self.process.output()
        code = self.process.exit_code()  # before the sync: what it wrote before it ended
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            self.on_line(line)
        if self.mirror is not None and not self._ended:
            self.mirror.sync()
        if code is not None:
            if self._partial:
                self.on_line(self._partial)
                self._partial = ""
            self._end(code)
        return text, code

    def kill(self) -> None:
        self.process.kill()
        self._end(KILLED)

    def _end(self, code: int) -> None:
        if self._ended:
            return
        self._ended = True
        self.on_end(code)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def restore_steps(
    local: Path, remote: str, names: Sequence[str], read: Callable[[str], bytes]
) -> dict[tuple[str, int], list[str]]:
    """Put the run's committed steps on the bucket (`names`: its object URIs under `remote`,
    `<remote>/checkpoints/<role>/<step>/...`) into its local folder, as the pod reads them, so
    that Tunix's checkpoint manager restores the newest one at start ("Restored params from
    step", tunix/sft/checkpoint_manager.py maybe_restore), as MaxText's train_rl does on gs://.
    Steps without their commit file are left out: Orbax skips an unfinalized step."""
    steps: dict[tuple[str, int], list[str]] = {}
    prefix = join(remote, "checkpoints") + "/"
    for uri in names:
        role, step, *rest = uri.removeprefix(prefix).split("/")
        if uri.startswith(prefix) and step.isdigit() and rest:
            steps.setdefault((role, int(step)), []).append(uri)
    committed = {
        key: uris
        for key, uris in steps.items()
        if join(prefix, key[0], str(key[1]), COMMIT_FILE) in uris
    }
    for uris in committed.values():
        for uri in uris:
            path = local / uri.removeprefix(remote).lstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(read(uri))
    return committed


def start_command(
    argv: Sequence[str],
    *,
    local: Path | None = None,
    remote: str | None = None,
    write: Write | None = None,
    delete: Delete | None = None,
    restored: dict[tuple[str, int], list[str]] | None = None,
    env: dict[str, str] | None = None,
    workdir: Path | None = None,
    on_line: Callable[[str], None] = lambda line: None,
    on_commit: Callable[[int], None] = lambda step: None,
    on_delete: Callable[[int], None] = lambda step: None,
    on_end: Callable[[int], None] = lambda code: None,
) -> AttachedCommand:
    """Start `argv`; with `local`, `remote`, `write` and `delete`, mirror `local` to `remote`."""
    mirror = None
    if local is not None and remote is not None and write is not None and delete is not None:
        mirror = OutputMirror(local, remote, write, delete, on_commit, on_delete, restored)
    return AttachedCommand(LocalProcess(argv, env), mirror, workdir, on_line, on_end)


def local_workdir() -> Path:
    """A fresh folder for one trainer process's local output."""
    return Path(tempfile.mkdtemp(prefix="tpu-rl-trainer-"))
