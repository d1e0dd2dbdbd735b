"""One whole DAG run against the sandbox: emulators up, the GKE seam patched, dag.test() run."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

from sandbox import zone_capacity
from sandbox.champion_eval import champion_evaluation_script
from sandbox.cloud import (
    BundleServer,
    GcsEmulator,
    GkeControlPlane,
    SandboxCredentials,
    add_running_cluster,
    fake_bundle,
    sandbox_env,
)
from sandbox.controller import Controller, Scenario
from sandbox.dag_test_pace import sandbox_paced_dag_test
from sandbox.heldout_eval import HeldoutWorkload, container_env, heldout_evaluation_script
from sandbox.kube_emulator import KubeEmulator, running_emulator
from sandbox.kube_logs import rfc3339nano
from sandbox.ledger import Ledger
from sandbox.max_run_duration import DEFAULT_MAX_RUN_S
from sandbox.maxtext_mesh import FLAGS as MESH_FLAGS
from sandbox.maxtext_mesh import refused_script
from sandbox.orbax_saves import complete_steps, join, orbax_step_uris
from sandbox.pod_scripts import PodInfo, PodScript, attach, call, exit, log
from sandbox.pod_storage import PodStorage
from sandbox.preemption import (
    SPOT_NOTICE_S,
    ClientFaults,
    Preemption,
    worker_slice_check,
)
from sandbox.project import HF_TOKEN, SETTINGS
from sandbox.real_trainer.process import (
    KILLED,
    STEP_LINE,
    AttachedCommand,
    RealTrainer,
    local_workdir,
    restore_steps,
    start_command,
    trainer_command,
    trainer_env,
    trainer_python,
)
from sandbox.run_errors import error_lines, recording_trigger_events
from sandbox.training_curve import NO_FAULTS, TrainingFaults
from sandbox.workloads import (
    LOG_PERIOD,
    MAX_TO_KEEP,
    STDERR_NOISE,
    EvalResult,
    Storage,
    absl,
    grpo_client_script,
    pathways_server_script,
    to_huggingface_script,
    to_maxtext_script,
)
from tpu_rl.names import DAG_ID

RUN_LABEL = "tpu-rl.dev/run"
MANAGED_LABEL = "app.kubernetes.io/managed-by=tpu-rl-airflow"
TRAINING_STARTED_STEP = 13  # past checkpoint loading and the Pre line, a few steps in
MAXTEXT = "/deps/src/maxtext/"
CONVERTED_ARRAYS = ("_METADATA", "_sharding")
RL_CHECKPOINT_PERIOD = 50  # MaxText rl.yml's checkpoint_period, when the command sets none
RL_EVAL_INTERVAL = 10  # MaxText rl.yml's eval_interval, when the command sets none
# Preemptible capacity: no reservation, 100 steps, a checkpoint every 50 (the e2e
# capacity scenarios and the bench's capacity figures).
PREEMPTIBLE = {**SETTINGS, "reservation": "", "num_batches": 100, "checkpoint_period": 50}
SPOT = {**PREEMPTIBLE, "capacity": "spot"}
FLEX = {**PREEMPTIBLE, "capacity": "flex_start"}
# A run that scores its saves on held-out GSM8K with the ARC-Easy guard (the held-out scenarios,
# their provenance and lineage): steps 30 and 40 are its top 2. 4 simulated hours a model: the
# Job's deadline is wall seconds at the sandbox's pace, and the pods' writes are real work that
# a loaded machine slows (4 x 30 minutes ran out under CI's load).
HELDOUT = {
    "num_batches": 40,
    "checkpoint_period": 10,
    "heldout_tasks": ["gsm8k"],
    "heldout_timeout_minutes": 240,
    "heldout_guard_tasks": ["arc_easy"],
    "heldout_top_k": 2,
}
# The cluster an existing-cluster run finds: the tutorial's, in the run's zone.
EXISTING_CLUSTER_VARS = {
    "zone": SETTINGS["zone"],
    "region": SETTINGS["region"],
    "num_slices": 1,
    "tpu_topology": "4x8",
    "reservation": SETTINGS["reservation"],
    "kueue": "pathways",  # Cluster Toolkit's Pathways Kueue configuration: tpu, cpu, memory
}


@dataclass
class Workloads:
    """How the simulated pods behave; the defaults are the tutorial's happy path."""

    pre: EvalResult | None = field(default_factory=lambda: EvalResult(corr=8, mean_reward=0.0821))
    post: EvalResult | None = field(default_factory=lambda: EvalResult(corr=12, mean_reward=0.1234))
    train_exit_code: int = 0
    train_fail_at_step: int | None = None
    convert_exit_code: int = 0
    export_exit_code: int = 0
    admit_after: float = 0.0
    worker_script: Any = None
    during_training: Callable[[], None] | None = None  # runs once training has started
    # {step: n}: the first client attempt's save of that step is cut after its first n objects
    # (orbax_saves.orbax_step_uris: Orbax's order); later attempts save in full
    train_save_cuts: dict[int, int] = field(default_factory=dict)
    # {step: result}: that step's Intermediate Eval (non-monotonic runs); others report `post`
    train_evals: dict[int, EvalResult] = field(default_factory=dict)
    convert_cut_after: int | None = None  # each conversion is killed after n objects
    sidecar: bool = False  # a webhook injects a second container into the training pod
    # Capacity: a TPU node is preempted when the client, in its attempt, logs one of
    # these steps (each entry once per run); the client then dies with gRPC UNAVAILABLE.
    preempt_at_steps: tuple[int, ...] = ()
    preemption_notice_s: float = SPOT_NOTICE_S
    provisioning_delay_s: float = 0.0  # flex-start/Spot slice scale-up (and node repair) delay
    scale_down_idle_s: float = 600.0  # an idle flex-start/Spot slice is removed after this
    # a flex-start node's max run duration (GKE's maxRunDurationSeconds, 7 days by default):
    # then it is taken away as a preempted node is (max_run_duration.py)
    flex_max_run_s: int = DEFAULT_MAX_RUN_S
    train_step_s: float = 60.0  # simulated seconds per GRPO step
    # varying step times (training_curve.VARIED_JITTER, VARIED_SLOW_EVERY); steady by default
    train_step_jitter: float = 0.0
    train_slow_step_every: int = 0
    train_seed: int = 0  # the step times' and metrics' seed
    # NaN, a loss spike, a stall, slow steps, a reward collapse, a KL blow-up
    train_faults: TrainingFaults = NO_FAULTS
    # a calendar-mode future reservation named as the run's `reservation`: (start, end), wall
    # clock (UTC); its VMs are deleted at the end (preemption.py)
    calendar_window: tuple[datetime, datetime] | None = None
    champion: EvalResult = field(default_factory=lambda: EvalResult(corr=10, mean_reward=0.1))
    # the training pod runs the real trainer (Tunix's GRPO on its toy model, on CPU:
    # sandbox.real_trainer) with these options instead of the simulated client; the options
    # above about the client's steps, evaluations, saves and faults do not apply then
    real_trainer: RealTrainer | None = None
    # what the held-out evaluation's models score per task, and its fault (heldout_eval.py)
    heldout: HeldoutWorkload = field(default_factory=HeldoutWorkload)


def build_scenario(
    settings: dict[str, Any],
    gcs: GcsEmulator,
    w: Workloads,
    emu: KubeEmulator | None = None,
    preemption: Preemption | None = None,
) -> Scenario:
    """Scripts for the run's pods, writing what MaxText writes into the GCS emulator.

    With `emu`, pods read and write as their own Google identity (a refused call fails them),
    the client's attempts are recorded in `emu.ledger` and workers die while their slice
    misses a host. With `preemption`, `w.preempt_at_steps` take TPU nodes away.
    """
    root = f"gs://{settings['gcs_bucket']}/gemma4-26b"
    ledger = emu.ledger if emu is not None else Ledger()
    python = trainer_python() if w.real_trainer is not None else None  # missing: fail now
    faults = ClientFaults(ledger, preemption, w.preempt_at_steps)
    save_cuts = dict(w.train_save_cuts)  # once per run: the first attempt takes them

    def storage(entrypoint: str) -> Storage:
        return PodStorage(emu, gcs, MAXTEXT + entrypoint) if emu is not None else gcs.write

    def flag(info: PodInfo, name: str) -> str | None:
        """A MaxText `name=value` flag of the pod's command, as the product gave it."""
        pod = emu.get("pods", info.namespace, info.pod) if emu is not None else None
        command = " ".join(
            " ".join(c.get("command") or [])
            for c in (pod or {"spec": {}})["spec"].get("containers") or []
        )
        found = re.search(rf"(?:^|\s){name}=(\S+)", command)
        return found.group(1).strip("'\"") if found else None

    def real_train(info: PodInfo, run_name: str, base: str, num_batches: int) -> PodScript:
        """The training pod as the real trainer's process (sandbox.real_trainer.process):
        MaxText's first lines, the converted checkpoint read as the pod, then grpo_toy.py with
        the pod's flags, its output folder mirrored to `<base>/<run_name>/` as the pod writes;
        its steps, commits and deletions recorded in the ledger. The run's committed steps on
        the bucket are put in its local folder first: Tunix restores the newest (a resume)."""
        assert w.real_trainer is not None and python is not None
        earlier = sum(a.run_name == run_name for a in ledger.attempts)
        options = w.real_trainer.for_attempt(earlier)
        pod_storage = storage("trainers/post_train/rl/train_rl.py")
        load = flag(info, "load_parameters_path")
        remote = join(base, run_name)
        bucket, _, folder = remote.removeprefix("gs://").partition("/")
        poisoned_from = options.poisoned_from()

        def start(pod: PodInfo) -> AttachedCommand:
            if load and isinstance(pod_storage, PodStorage):
                pod_storage.read(pod, join(load, "_METADATA"))  # may end the container (403)

            def read(uri: str) -> bytes:
                if isinstance(pod_storage, PodStorage):
                    return pod_storage.read(pod, uri)
                return gcs.read(uri)

            def write(uri: str, data: bytes) -> None:
                if isinstance(pod_storage, PodStorage):
                    pod_storage.write(pod, uri, data)
                else:
                    pod_storage(uri, data)

            def delete(uri: str) -> None:
                if isinstance(pod_storage, PodStorage):
                    pod_storage.delete(pod, uri)
                else:
                    gcs.delete(uri)

            def on_line(line: str) -> None:
                if found := STEP_LINE.search(line):
                    ledger.step_done(attempt, int(found.group(1)))

            def on_commit(step: int) -> None:
                poisoned = poisoned_from is not None and step >= poisoned_from
                ledger.checkpoint_committed(run_name, step, poisoned)

            def on_end(code: int) -> None:
                outcome = {0: "completed", KILLED: "killed"}.get(code, "error")
                ledger.end_attempt(attempt, outcome)

            workdir = local_workdir()
            names = [f"gs://{bucket}/{name}" for name in gcs.names(bucket, f"{folder}/")]
            on_bucket = restore_steps(workdir / run_name, remote, names, read)
            restored = max((step for role, step in on_bucket if role == "actor"), default=None)
            attempt = ledger.attempt(pod.pod, run_name, restored)
            command = trainer_command(
                python,
                workdir,
                run_name,
                steps=num_batches,
                checkpoint_period=int(flag(pod, "checkpoint_period") or RL_CHECKPOINT_PERIOD),
                eval_interval=int(flag(pod, "eval_interval") or RL_EVAL_INTERVAL),
                log_period=int(flag(pod, "log_period") or LOG_PERIOD),
                num_generations=int(flag(pod, "rl.num_generations") or 2),
                options=options,
            )
            return start_command(
                command,
                local=workdir / run_name,
                remote=remote,
                write=write,
                delete=delete,
                restored=on_bucket,
                env=trainer_env(),
                workdir=workdir,
                on_line=on_line,
                on_commit=on_commit,
                on_delete=lambda step: ledger.checkpoint_deleted(run_name, step),
                on_end=on_end,
            )

        loading = absl("I", "Loading checkpoint from load_parameters_path", "checkpointing.py:611")
        steps = [log(STDERR_NOISE), log(loading), attach(start)]
        shutdown = absl("I", "Shutting down Pathways client", "pathways.py:201")
        return PodScript([*steps, log(shutdown), exit(0)])

    def train(info: PodInfo) -> PodScript:
        backend = f"{info.labels[RUN_LABEL]}-backend"
        found = emu.get("jobsets", info.namespace, backend) if emu is not None else None
        mesh = {name: value for name in MESH_FLAGS if (value := flag(info, name)) is not None}
        if refused := refused_script(mesh, found):  # MaxText's multi-slice meshes
            return refused
        run_name = flag(info, "run_name") or info.labels[RUN_LABEL]
        base = flag(info, "base_output_directory") or f"{root}/trained/"
        num_batches = int(flag(info, "num_batches") or 50)
        if w.real_trainer is not None:
            return real_train(info, run_name, base, num_batches)
        checkpoints = f"{base.rstrip('/')}/{run_name}/checkpoints/actor/"
        bucket, _, prefix = checkpoints.removeprefix("gs://").partition("/")
        existing = complete_steps(gcs.names(bucket, prefix), prefix)
        restored = max(existing, default=None)
        earlier = sum(a.run_name == run_name for a in ledger.attempts)
        attempt = ledger.attempt(info.pod, run_name, restored)
        cuts = dict(save_cuts)
        save_cuts.clear()
        before_step, after_step = faults.hooks(
            attempt, info.labels.get(RUN_LABEL, run_name), num_batches, w.train_fail_at_step
        )
        script = grpo_client_script(
            base_output_directory=base,
            run_name=run_name,
            num_batches=num_batches,
            checkpoint_period=int(flag(info, "checkpoint_period") or RL_CHECKPOINT_PERIOD),
            eval_every=int(flag(info, "eval_interval") or RL_EVAL_INTERVAL),
            pre=w.pre,
            post=w.post,
            evals=w.train_evals,
            exit_code=w.train_exit_code,
            fail_at_step=w.train_fail_at_step,
            write_object=storage("trainers/post_train/rl/train_rl.py"),
            load_parameters_path=flag(info, "load_parameters_path"),
            cut_saves=cuts,
            resume_from=restored,
            step_seconds=w.train_step_s,
            step_jitter=w.train_step_jitter,
            slow_step_every=w.train_slow_step_every,
            seed=w.train_seed,
            faults=w.train_faults.for_attempt(earlier),
            max_to_keep=int(flag(info, "max_num_checkpoints_to_keep") or MAX_TO_KEEP),
            existing_steps=tuple(existing),
            log_period=int(flag(info, "log_period") or LOG_PERIOD),
            checkpoints=ledger,
            # the events' wall_time in simulated epoch seconds; the file's name from the wall
            # clock the Job's creationTimestamp has (an attempt reads its own files only)
            event_clock=lambda: ledger.clock.wall0.timestamp() + ledger.clock(),
            event_file_clock=time.time,
            before_step=before_step,
            after_step=after_step,
        )
        if w.during_training is None:
            return script
        hook = w.during_training
        steps = list(script.steps)
        steps.insert(TRAINING_STARTED_STEP, call(lambda _info: hook()))
        return PodScript(steps, script.container)

    def convert(info: PodInfo) -> PodScript:
        return to_maxtext_script(
            flag(info, "base_output_directory") or f"{root}/max-text-format/",
            storage("checkpoint_conversion/to_maxtext.py"),
            w.convert_exit_code,
            w.convert_cut_after,
        )

    def champion(info: PodInfo) -> PodScript:
        """The champion's evaluation: what it scores is the workloads' `champion`."""

        def backend_exists(pod: PodInfo) -> bool:
            name = f"{pod.labels[RUN_LABEL]}-backend"
            found = emu.get("jobsets", pod.namespace, name) if emu is not None else {}
            return found is not None and not (found.get("metadata") or {}).get("deletionTimestamp")

        train_rl = storage("trainers/post_train/rl/train_rl.py")
        return champion_evaluation_script(info, flag, w.champion, train_rl, backend_exists)

    def heldout(info: PodInfo) -> PodScript:
        """A host of the held-out evaluation: its command and environment read from the pod
        (the token from the run's Secret); what each model scores is the workloads' `heldout`."""
        pod = emu.get("pods", info.namespace, info.pod) if emu is not None else None
        [container, *_] = (pod or {"spec": {}})["spec"].get("containers") or [{}]

        def secret(name: str) -> dict[str, Any] | None:
            return emu.get("secrets", info.namespace, name) if emu is not None else None

        return heldout_evaluation_script(
            info,
            container.get("command") or [],
            container_env(container, secret),
            w.heldout,
            storage("eval/runner/harness_runner.py"),
            lambda: ledger.clock.wall0 + timedelta(seconds=ledger.clock()),  # simulated now
        )

    def export(info: PodInfo) -> PodScript:
        return to_huggingface_script(
            flag(info, "base_output_directory") or f"{root}/hf-trained/{info.labels[RUN_LABEL]}/",
            write_object=storage("checkpoint_conversion/to_huggingface.py"),
            exit_code=w.export_exit_code,
            load_parameters_path=flag(info, "load_parameters_path"),
        )

    scenario = (
        Scenario(
            provisioning_delay_s=w.provisioning_delay_s,
            scale_down_idle_s=w.scale_down_idle_s,
            flex_max_run_s=w.flex_max_run_s,
        )
        .on("-train", train, admit_after=w.admit_after)
        .on("-convert", convert, index=0)
        .on("-export", export, index=0)
        .on("-champion", champion)
        .on("-heldout", heldout)
        .on("pathways-head", pathways_server_script("proxy", container="pathways-proxy"))
    )
    if w.worker_script is not None:
        scenario.on("-worker", w.worker_script, index=3)
    check = worker_slice_check(emu) if emu is not None else None
    return scenario.on("-worker", pathways_server_script("worker", check=check))


@dataclass
class RunResult:
    """What a test asserts on after one DAG run."""

    run_id: str
    state: str
    task_states: dict[str, str | None]
    xcoms: dict[str, Any]
    leftovers: list[str]
    clusters: dict[str, Any]
    calls: list[dict]
    emu: KubeEmulator
    gcs: GcsEmulator
    gke_lookups: int
    ledger: Ledger  # node lifetimes, TPU pod run times, client attempts (simulated seconds)
    preempted: list[str]  # nodes the preemption fault took, in order

    trigger_events: list[dict[str, Any]]  # each deferred wait's event, with its task_id

    @property
    def unsuccessful(self) -> dict[str, str | None]:
        """The tasks that did not succeed: an assertion message short enough to be read whole."""
        return {t: s for t, s in self.task_states.items() if s != "success"}

    def why(self, log: str = "") -> str:
        """An assertion message read whole (a string: pytest shortens a tuple's repr): the
        run's state, the tasks that did not succeed, the waits that ended in an error (their
        events: dag.test keeps no task log) and the output's last error lines."""
        ended = ("success", "running", None)  # "running": a progress report, not an end
        failed = [e for e in self.trigger_events if e.get("status") not in ended]
        waits = "\n  ".join(str(e)[:1500] for e in failed) or "(none)"
        lines = "\n  ".join(error_lines(log)) or "(none)"
        return (
            f"run {self.state}; tasks not success: {self.unsuccessful}\n"
            f"waits that ended in an error:\n  {waits}\nlast error lines:\n  {lines}"
        )


class Sandbox:
    """Everything a run needs, started once per test."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.preemption: Preemption | None = None  # run() makes one; the bench's own runs not

    @contextlib.contextmanager
    def up(
        self,
        existing_cluster: str | None = None,
        env: dict[str, str] | None = None,
        existing_cluster_vars: dict[str, Any] | None = None,
    ) -> Iterator[Sandbox]:
        """`existing_cluster_vars` override how the existing cluster is described."""
        from sandbox.google_apis import GoogleApisEmulator

        bundles = BundleServer()
        gcs = GcsEmulator()
        self.google = google = GoogleApisEmulator()  # preflight's reads (project_facts.py)
        with contextlib.ExitStack() as stack:
            stack.callback(bundles.close)
            stack.callback(gcs.stop)
            stack.callback(google.stop)
            self.emu = stack.enter_context(running_emulator())
            self.gcs = gcs
            gcs.location = SETTINGS["region"]
            environment = sandbox_env(self.tmp, bundles.url, gcs.host)
            from tpu_rl.cluster import blueprint

            version = "v1.103.0"
            bundles.files[f"/mirror/{version}/{blueprint.bundle_name()}"] = fake_bundle()
            environment.update(
                {
                    "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT": json.dumps(
                        {
                            "conn_type": "google_cloud_platform",
                            "extra": {"project": SETTINGS["project"]},
                        }
                    ),
                    "AIRFLOW_CONN_HUGGINGFACE_DEFAULT": json.dumps(
                        {"conn_type": "generic", "password": HF_TOKEN}
                    ),
                    "TPU_RL_API_ENDPOINTS": json.dumps(google.endpoints()),
                    **(env or {}),
                }
            )
            environment[zone_capacity.ENV] = str(self.tmp / "capacity.json")
            stack.enter_context(mock.patch.dict(os.environ, environment))
            # stockout windows per zone and mode, on the simulated clock
            self.capacity = zone_capacity.ZoneCapacity(
                Path(environment[zone_capacity.ENV]), lambda: self.emu.ledger.clock()
            )
            state_file = Path(environment["FAKE_CLOUD_STATE"])
            if existing_cluster:
                add_running_cluster(
                    state_file,
                    existing_cluster,
                    SETTINGS["project"],
                    {**EXISTING_CLUSTER_VARS, **(existing_cluster_vars or {})},
                )
            gcs.gate.roles_of = lambda principal: (
                self.emu.cluster.roles_of(principal) if self.emu.cluster else set()
            )
            google.facts.account_roles = lambda: self.emu.cluster.roles if self.emu.cluster else {}
            self.control_plane = GkeControlPlane(self.emu, state_file)
            from airflow.providers.google.cloud.hooks.kubernetes_engine import GKEHook
            from airflow.providers.google.common.hooks.base_google import GoogleBaseHook

            credentials = SandboxCredentials(self.emu)
            stack.enter_context(
                mock.patch.object(
                    GKEHook,
                    "get_cluster",
                    lambda hook, name, project_id=None, **kw: self.control_plane.get_cluster(
                        hook, name, project_id
                    ),
                )
            )
            stack.enter_context(
                mock.patch.object(
                    GKEHook,
                    "delete_cluster",
                    lambda hook, name, project_id=None, **kw: self.control_plane.delete_cluster(
                        hook, name, project_id
                    ),
                )
            )
            stack.enter_context(
                mock.patch.object(
                    GoogleBaseHook,
                    "get_credentials_and_project_id",
                    lambda hook: (credentials, SETTINGS["project"]),
                )
            )
            self.state_file = state_file
            yield self

    def run(
        self,
        conf: dict[str, Any],
        workloads: Workloads | None = None,
        time_scale: float = 0.001,
        logical_date: datetime | None = None,
    ) -> RunResult:
        """Trigger one run with these settings and wait for it to end; `time_scale`: wall
        seconds per simulated second of the pods (and the ledger's clock); `logical_date`:
        the run's schedule slot, hence its run id (now by default)."""
        from sandbox.dagbags import DagBag

        dag = DagBag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"]).dags[DAG_ID]
        w = workloads or Workloads()
        self.preemption = preemption = Preemption(
            self.emu, lambda: self.emu.ledger.clock(), RUN_LABEL, w.preemption_notice_s
        )
        scenario = build_scenario(conf, self.gcs, w, self.emu, preemption)
        if w.calendar_window is not None:
            start, end = (rfc3339nano(t) for t in w.calendar_window)
            window = {"zone": conf["zone"], "startTime": start, "endTime": end}
            self.google.facts.future_reservations[conf["reservation"]] = window
            preemption.calendar_end = w.calendar_window[1]
        if w.sidecar:
            self.emu.admission_hooks.append(inject_sidecar)
        reconcilers = (self.control_plane.sync, self.capacity.reconcile)
        events: list[dict[str, Any]] = []
        with (
            Controller(
                self.emu,
                scenario,
                time_scale=time_scale,
                reconcilers=reconcilers,
                preemption=preemption,  # also ends flex-start nodes: the client sees it
            ),
            recording_trigger_events(events),
            sandbox_paced_dag_test(),
        ):
            # a manual run's id comes from run_after (DagRun.generate_run_id)
            dated = (
                {"logical_date": logical_date, "run_after": logical_date} if logical_date else {}
            )
            dag_run = dag.test(run_conf=conf, **dated)
        return self.result(dag_run, events)

    def result(self, dag_run: Any, trigger_events: list[dict[str, Any]]) -> RunResult:
        from airflow.models.taskinstance import TaskInstance
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session

        with create_session() as session:
            tis = session.query(TaskInstance).filter_by(dag_id=DAG_ID, run_id=dag_run.run_id).all()
            states = {ti.task_id: _value(ti.state) for ti in tis}
            xcoms = {
                f"{x.task_id}.{x.key}": x.value
                for x in session.query(XComModel).filter_by(dag_id=DAG_ID, run_id=dag_run.run_id)
            }
        calls_file = Path(os.environ["FAKE_CLOUD_LOG"])
        calls = (
            [json.loads(line) for line in calls_file.read_text().splitlines()]
            if calls_file.exists()
            else []
        )
        state = json.loads(self.state_file.read_text()) if self.state_file.exists() else {}
        return RunResult(
            run_id=dag_run.run_id,
            state=_value(dag_run.state),
            task_states=states,
            xcoms=xcoms,
            leftovers=self.leftovers(),
            clusters=state.get("clusters", {}),
            calls=calls,
            emu=self.emu,
            gcs=self.gcs,
            gke_lookups=self.control_plane.lookups,
            ledger=self.emu.ledger,
            preempted=list(self.preemption.preempted) if self.preemption else [],
            trigger_events=trigger_events,
        )

    def leftovers(self) -> list[str]:
        """Every object this package labelled that still exists (pods included)."""
        return [
            f"{plural}/{obj['metadata']['name']}"
            for plural in ("jobs", "jobsets", "secrets", "pods")
            for obj in self.emu.list(plural, label_selector=MANAGED_LABEL)
        ]


def logged_note(records: list[logging.LogRecord]) -> str:
    """The run's note as outcome logged it: dag.test has no Airflow API connection, so
    set_run_note logs the note it could not set (tpu_rl.report.run_note). The last one: the
    reward wait's progress reports set it earlier, while training runs."""
    *_, note = [
        r.getMessage().partition("It reads:\n")[2]
        for r in records
        if r.getMessage().startswith("The run's note is not set")
    ]
    return note


def converted_folder(conf: dict[str, Any]) -> str:
    """The folder the product converts the run's model into (its layout, from `conf`)."""
    from tpu_rl.layout import RunLayout
    from tpu_rl.settings.run_settings import load_settings

    # shared by every run and deployment converting the same model: any run id and identity
    return RunLayout(load_settings(conf), "manual__converted", "any-deployment").maxtext_dir


def write_converted(gcs: GcsEmulator, conf: dict[str, Any], written: int | None = None) -> None:
    """A conversion of the run's model saved before the run, in Orbax's order; `written`: cut
    after that many objects (None: committed)."""
    step = f"{converted_folder(conf).rstrip('/')}/0"
    for uri in orbax_step_uris(step, "items", CONVERTED_ARRAYS)[:written]:
        gcs.write(uri, b"\0")


def inject_sidecar(resource: Any, obj: dict[str, Any]) -> None:
    """A mutating webhook (as a service mesh's) adding a proxy container to training pods."""
    name = obj["metadata"].get("name", "")
    if resource.kind == "Pod" and "-train-" in name:
        proxy = {"name": "istio-proxy", "image": "docker.io/istio/proxyv2:1.24.0"}
        obj["spec"]["containers"] = [*obj["spec"]["containers"], proxy]


def _value(state: Any) -> str | None:
    """A state enum or string as its plain string."""
    return getattr(state, "value", state)
