"""The seam the real trainer runs through, without JAX: a pod script's `attach` step (the
controller pumps a real process's output into the pod log, goes on or ends with its exit code,
kills it with the pod) and the mirror of its output folder into Cloud Storage (Orbax's order on
gs://, TensorBoard files re-uploaded whole, rotated steps deleted). A `python -c` script stands
in for the trainer."""

from __future__ import annotations

import os
import struct
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox.controller import Controller, Scenario
from sandbox.kube_emulator import KubeEmulator, running_emulator
from sandbox.orbax_saves import complete_steps
from sandbox.pod_scripts import ContainerExit, PodInfo, PodScript, attach, exit, log
from sandbox.real_trainer.process import (
    KILLED,
    AttachedCommand,
    OutputMirror,
    RealTrainer,
    TrainerMissing,
    start_command,
    trainer_command,
    trainer_python,
)
from sandbox.tensorboard_events import file_version_event, scalar_event, tfrecord
from tests.waits import wait_for

NS = "default"
REMOTE = "gs://bucket/trained/rl"


@pytest.fixture
def emu() -> Iterator[KubeEmulator]:
    with running_emulator() as emulator:
        yield emulator


def wait(predicate: Callable[[], Any]) -> Any:
    """wait_for with time for a real process to start and end."""
    return wait_for(predicate, timeout=20.0)


def job(name: str) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "completions": 1,
            "parallelism": 1,
            "backoffLimit": 0,
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "base", "image": "x"}]}
            },
        },
    }


def pod_of(emu: KubeEmulator, job_name: str) -> dict | None:
    pods = emu.list("pods", NS, f"job-name={job_name}")
    return pods[0] if pods else None


def pod_log(emu: KubeEmulator, pod: dict) -> str:
    _, found = emu.read_log(NS, pod["metadata"]["name"], "base")
    return found.render(found.select(), timestamps=False).decode()


def terminated(pod: dict) -> dict:
    statuses = pod["status"].get("containerStatuses") or [{}]
    return statuses[0].get("state", {}).get("terminated") or {}


def python(code: str) -> Callable[[PodInfo], AttachedCommand]:
    """An attach step's start: `python -c code` (this interpreter)."""
    return lambda _info: start_command([sys.executable, "-c", code])


def run_script(emu: KubeEmulator, steps: list, name: str = "job-attach") -> dict:
    """Run one pod with these steps to its end; the ended pod."""
    with Controller(emu, Scenario(default=PodScript(steps))):
        emu.create(job(name))
        return wait(lambda: (p := pod_of(emu, name)) and _ended(p) and p)


def _ended(pod: dict) -> bool:
    return pod["status"].get("phase") in ("Succeeded", "Failed")


def test_attach_puts_the_output_in_the_pod_log_and_goes_on(emu):
    code = "import sys; print('hello'); sys.stdout.flush(); sys.stderr.write('partial')"
    pod = run_script(emu, [log("before\n"), attach(python(code)), log("after\n"), exit(0)])
    assert pod["status"]["phase"] == "Succeeded"
    assert pod_log(emu, pod) == "before\nhello\npartialafter\n"  # stdout and stderr merged


def test_a_failing_process_ends_the_container_with_its_code(emu):
    code = "import sys; print('dying'); sys.exit(3)"
    pod = run_script(emu, [attach(python(code)), log("after\n"), exit(0)])
    assert pod["status"]["phase"] == "Failed"
    assert terminated(pod)["exitCode"] == 3
    assert pod_log(emu, pod) == "dying\n"


def test_a_deleted_pod_kills_its_stopped_process_and_reaps_it(emu):
    """A process that stopped itself (a hung trainer: alive, silent) dies with its pod."""
    code = "import os, signal; print(os.getpid(), flush=True); os.kill(os.getpid(), signal.SIGSTOP)"
    ends: list[int] = []

    def start(_info: PodInfo) -> AttachedCommand:
        return start_command([sys.executable, "-c", code], on_end=ends.append)

    with Controller(emu, Scenario(default=PodScript([attach(start), exit(0)]))):
        emu.create(job("job-stall"))
        pod = wait(lambda: (p := pod_of(emu, "job-stall")) and _running(p) and _logged(emu, p))
        pid = int(pod_log(emu, pod))
        wait(lambda: _state(pid) == "T")  # stopped, and still there
        emu.delete("pods", NS, pod["metadata"]["name"])
        wait(lambda: not Path(f"/proc/{pid}").exists())  # killed and reaped: no zombie
    assert ends == [KILLED]


def _running(pod: dict) -> bool:
    return pod["status"].get("phase") == "Running"


def _logged(emu: KubeEmulator, pod: dict) -> dict | None:
    return pod if pod_log(emu, pod).strip() else None


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


class RefusedStorage:
    """An attached process whose storage refuses (a 403 from GCS) at the first pump."""

    def __init__(self) -> None:
        self.killed = False

    def pump(self) -> tuple[str, int | None]:
        raise ContainerExit(1, "google.api_core.exceptions.Forbidden: 403\n")

    def kill(self) -> None:
        self.killed = True


def test_a_refused_write_kills_the_process_and_fails_the_container(emu):
    process = RefusedStorage()
    pod = run_script(emu, [attach(lambda _info: process), exit(0)])
    assert pod["status"]["phase"] == "Failed" and terminated(pod)["exitCode"] == 1
    assert pod_log(emu, pod).endswith("Forbidden: 403\n")
    assert process.killed


def test_a_start_refused_ends_the_container_before_any_process(emu):
    def start(_info: PodInfo) -> AttachedCommand:
        raise ContainerExit(1, "403 reading the converted checkpoint\n")

    pod = run_script(emu, [log("loading\n"), attach(start), exit(0)])
    assert terminated(pod)["exitCode"] == 1
    assert pod_log(emu, pod) == "loading\n403 reading the converted checkpoint\n"


# -- the output folder's mirror ---------------------------------------------------------------


class Bucket:
    """What the mirror did, in order: ("write", uri, data) and ("delete", uri)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.objects: dict[str, bytes] = {}

    def write(self, uri: str, data: bytes) -> None:
        self.calls.append(("write", uri, data))
        self.objects[uri] = data

    def delete(self, uri: str) -> None:
        self.calls.append(("delete", uri))
        del self.objects[uri]

    def take(self) -> list[tuple]:
        calls, self.calls = self.calls, []
        return calls


def orbax_step(folder: Path, step: int, tmp: bool = True) -> Path:
    """A local Orbax save of `step` as Tunix leaves it (two items, commit files)."""
    step_dir = folder / (f"{step}.orbax-checkpoint-tmp" if tmp else str(step))
    for item in ("model_params", "optimizer_state"):
        for name in ("_METADATA", "_sharding", "manifest.ocdbt", "d/0abc", "commit_success.txt"):
            path = step_dir / item / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(f"{step}/{item}/{name}".encode())
    (step_dir / "_CHECKPOINT_METADATA").write_text("{}")
    (step_dir / "commit_success.txt").write_text("done")
    return step_dir


def test_the_mirror_uploads_a_step_once_committed_in_orbax_order(tmp_path):
    bucket, commits = Bucket(), []
    mirror = OutputMirror(tmp_path, REMOTE, bucket.write, bucket.delete, commits.append)
    actor = tmp_path / "checkpoints" / "actor"
    saving = orbax_step(actor, 5)
    mirror.sync()
    assert bucket.take() == [] and commits == []  # still the temporary folder: not committed
    saving.rename(actor / "5")
    mirror.sync()
    step = f"{REMOTE}/checkpoints/actor/5"
    item = [
        f"{step}/{{}}/_METADATA",
        f"{step}/{{}}/_sharding",
        f"{step}/{{}}/d/0abc",
        f"{step}/{{}}/manifest.ocdbt",
        f"{step}/{{}}/commit_success.txt",
    ]
    assert [c[1] for c in bucket.take()] == [
        f"{step}/_CHECKPOINT_METADATA",
        *(u.format("model_params") for u in item),
        *(u.format("optimizer_state") for u in item),
        f"{step}/_CHECKPOINT_METADATA",
        f"{step}/commit_success.txt",
    ]
    assert commits == [5]
    assert bucket.objects[f"{step}/model_params/d/0abc"] == b"5/model_params/d/0abc"
    mirror.sync()
    assert bucket.take() == []  # once


def test_a_step_cut_anywhere_in_its_upload_is_not_complete(tmp_path):
    """Every prefix of a step's uploads but the whole lacks the step's commit file, so a
    reader of the bucket (orbax_saves.complete_steps, the product) never takes it."""
    bucket = Bucket()
    mirror = OutputMirror(tmp_path, REMOTE, bucket.write, bucket.delete)
    orbax_step(tmp_path / "checkpoints" / "actor", 10, tmp=False)
    mirror.sync()
    names = [c[1].removeprefix("gs://bucket/") for c in bucket.take()]
    prefix = "trained/rl/checkpoints/actor/"
    assert [complete_steps(names[:n], prefix) for n in range(len(names))] == [[]] * len(names)
    assert complete_steps(names, prefix) == [10]


def test_the_mirror_deletes_a_step_orbax_rotated_out_commit_file_first(tmp_path):
    bucket, deleted = Bucket(), []
    mirror = OutputMirror(tmp_path, REMOTE, bucket.write, bucket.delete, on_delete=deleted.append)
    actor = tmp_path / "checkpoints" / "actor"
    for step in (1, 5):
        orbax_step(actor, step, tmp=False)
    mirror.sync()
    bucket.take()
    for path in sorted((actor / "1").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    (actor / "1").rmdir()
    mirror.sync()
    calls = bucket.take()
    assert {c[0] for c in calls} == {"delete"}
    assert calls[0][1] == f"{REMOTE}/checkpoints/actor/1/commit_success.txt"
    assert sorted(bucket.objects) == sorted(u for u in bucket.objects if "/actor/5/" in u)
    assert len(calls) == 12 and deleted == [1]


def test_a_tensorboard_file_is_uploaded_whole_when_it_grew_in_whole_records(tmp_path):
    bucket = Bucket()
    mirror = OutputMirror(tmp_path, REMOTE, bucket.write, bucket.delete)
    events = tmp_path / "tensorboard" / "events.out.tfevents.1796558985.vm"
    events.parent.mkdir()
    first = tfrecord(file_version_event(1.0))
    second = tfrecord(scalar_event(2.0, 1, "actor/train/loss", 0.5))
    events.write_bytes(first + second[:10])  # the writer is mid-record
    mirror.sync()
    uri = f"{REMOTE}/tensorboard/events.out.tfevents.1796558985.vm"
    assert bucket.take() == [("write", uri, first)]
    mirror.sync()
    assert bucket.take() == []  # no whole record more
    events.write_bytes(first + second)
    mirror.sync()
    assert bucket.take() == [("write", uri, first + second)]  # the whole file again
    assert struct.unpack_from("<Q", first)[0] == len(file_version_event(1.0))


def test_the_process_output_folder_reaches_the_bucket_before_its_end_is_told(tmp_path):
    """What the process wrote just before it ended is mirrored before its exit code is
    returned: the last save is on the bucket when the script goes on."""
    local = tmp_path / "out" / "rl"
    code = (
        "import pathlib\n"
        f"actor = pathlib.Path({str(local)!r}) / 'checkpoints' / 'actor'\n"
        "step = actor / '20.orbax-checkpoint-tmp'\n"
        "(step / 'model_params').mkdir(parents=True)\n"
        "for name in ('model_params/_METADATA', 'model_params/commit_success.txt',\n"
        "             '_CHECKPOINT_METADATA', 'commit_success.txt'):\n"
        "    (step / name).write_text(name)\n"
        "step.rename(step.with_name('20'))\n"
        "print('Train step 20 training loss: 0.1  - training perplexity: 1.1')\n"
    )
    bucket, lines, commits, ends = Bucket(), [], [], []
    attached = start_command(
        [sys.executable, "-c", code],
        local=local,
        remote=REMOTE,
        write=bucket.write,
        delete=bucket.delete,
        workdir=tmp_path / "out",
        on_line=lines.append,
        on_commit=commits.append,
        on_end=ends.append,
    )
    output, ended = "", None
    while ended is None:
        text, ended = attached.pump()
        output += text
        time.sleep(0.01)
    assert ended == 0 and commits == [20] and ends == [0]
    assert f"{REMOTE}/checkpoints/actor/20/commit_success.txt" in bucket.objects
    assert lines == ["Train step 20 training loss: 0.1  - training perplexity: 1.1"]
    assert output == lines[0] + "\n"
    assert not (tmp_path / "out").exists()  # its working folder is removed at the end


# -- the trainer's command ----------------------------------------------------------------------


def test_the_pods_flags_and_the_options_become_the_trainers(tmp_path):
    options = RealTrainer(fault="stall", fault_step=12, learning_rate=0.01, seed=3)
    command = trainer_command(
        Path("/venv/bin/python"),
        tmp_path,
        "rl-1",
        steps=20,
        checkpoint_period=5,
        eval_interval=5,
        log_period=20,
        num_generations=4,
        options=options,
    )
    assert command[0] == "/venv/bin/python" and command[1].endswith("grpo_toy.py")
    assert command[2:] == [
        f"--base-output-directory={tmp_path}",
        "--run-name=rl-1",
        "--steps=20",
        "--checkpoint-period=5",
        "--eval-interval=5",
        "--log-period=20",
        "--num-generations=4",
        "--fault=stall",
        "--fault-step=12",
        "--learning-rate=0.01",
        "--seed=3",
    ]
    assert RealTrainer(fault="overflow", fault_step=12).poisoned_from() == 12
    assert RealTrainer(fault="stall", fault_step=12).poisoned_from() is None
    with pytest.raises(ValueError, match="fault 'nan'"):
        RealTrainer(fault="nan")


def test_a_missing_trainer_venv_says_to_make_it(monkeypatch, tmp_path):
    monkeypatch.setenv("TPU_RL_TRAINER_PYTHON", str(tmp_path / "missing" / "python"))
    with pytest.raises(TrainerMissing, match="run `make venv-trainer`"):
        trainer_python()


def test_a_run_on_a_missing_trainer_fails_before_it_starts(monkeypatch, tmp_path):
    from sandbox.cloud import GcsEmulator
    from sandbox.harness import SETTINGS, Workloads, build_scenario

    monkeypatch.setenv("TPU_RL_TRAINER_PYTHON", str(tmp_path / "missing" / "python"))
    gcs = GcsEmulator()
    try:
        with pytest.raises(TrainerMissing):
            build_scenario(SETTINGS, gcs, Workloads(real_trainer=RealTrainer()))
    finally:
        gcs.stop()
    assert os.environ["TPU_RL_TRAINER_PYTHON"].endswith("missing/python")
