"""A simulated Job + JobSet controller and kubelet, driving the emulator through its Python API.

Jobs get pods, pods run scripted output and exit codes taken from a Scenario, and Job and
JobSet status follow as Kubernetes 1.35 and JobSet v0.10 set them. Every duration in a
scenario is simulated seconds; `time_scale` turns them into wall seconds.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sandbox import kube_events
from sandbox.autoscaler import Autoscaler
from sandbox.kube_emulator import KubeEmulator
from sandbox.kube_state import ApiError
from sandbox.kueue import Kueue
from sandbox.ledger import SimClock
from sandbox.max_run_duration import DEFAULT_MAX_RUN_S
from sandbox.pod_scripts import (
    AttachedProcess,
    ContainerExit,
    PodInfo,
    PodScript,
    ScriptSource,
    Step,
    exit,
    log,
    sleep,
)
from sandbox.preemption import Preemption
from sandbox.scheduler import Scheduler

JOBSET_PREFIX = "jobset.sigs.k8s.io/"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


@dataclass(frozen=True)
class Rule:
    script: ScriptSource
    job: str | None = None
    labels: dict[str, str] | None = None
    index: int | None = None
    admit_after: float = 0.0

    def matches_job(self, job_name: str, labels: dict[str, str]) -> bool:
        wanted = self.labels or {}
        return (self.job is None or self.job in job_name) and all(
            labels.get(k) == v for k, v in wanted.items()
        )


@dataclass
class Scenario:
    """Which script each pod runs: the first rule whose Job-name substring and labels match."""

    rules: list[Rule] = field(default_factory=list)
    default: ScriptSource = field(
        default_factory=lambda: PodScript([log("done\n"), sleep(5), exit(0)])
    )
    pending_s: float = 2.0  # how long a created pod stays Pending
    terminate_s: float = 5.0  # how long a deleted pod stays Terminating (at most its grace)
    crash_backoff_s: float = 10.0  # kubelet's back-off before restarting a failed container
    provisioning_delay_s: float = 0.0  # a TPU slice pool's scale-up (flex-start may queue long)
    scale_down_idle_s: float = 600.0  # an idle TPU slice is removed after this
    flex_max_run_s: int = DEFAULT_MAX_RUN_S  # a flex-start node's max run duration

    def on(
        self,
        job: str | None = None,
        script: ScriptSource | None = None,
        *,
        labels: dict[str, str] | None = None,
        index: int | None = None,
        admit_after: float = 0.0,
    ) -> Scenario:
        """Add a rule; `admit_after` holds the Job's pods back (Kueue or TPU capacity)."""
        self.rules.append(Rule(script or self.default, job, labels, index, admit_after))
        return self

    def admission_delay(self, job_name: str, labels: dict[str, str]) -> float:
        delays = [r.admit_after for r in self.rules if r.matches_job(job_name, labels)]
        return max(delays, default=0.0)

    def script_for(self, info: PodInfo) -> PodScript:
        for rule in self.rules:
            if rule.matches_job(info.job, info.labels) and rule.index in (None, info.index):
                source = rule.script
                break
        else:
            source = self.default
        return source(info) if callable(source) else source


@dataclass
class _Run:
    """A pod as the kubelet runs it: where its script is and when the next step is due."""

    info: PodInfo
    container: str
    on_failure_restart: bool
    steps: list[Step] = field(default_factory=list)
    position: int = 0
    due: float = 0.0
    state: str = "Pending"  # Pending, Running, Forever, Attached, Done
    check: Callable[[PodInfo], None] | None = None  # a Forever container's periodic check
    every_s: float = 0.0
    process: AttachedProcess | None = None  # an Attached container's real process


class Controller:
    """Reconciles Jobs, JobSets and pod scripts in a background thread."""

    def __init__(
        self,
        emu: KubeEmulator,
        scenario: Scenario | None = None,
        time_scale: float = 0.001,
        tick_s: float = 0.02,
        reconcilers: tuple[Callable[[], None], ...] = (),
        catch_up: bool = False,
        preemption: Preemption | None = None,
    ) -> None:
        """`reconcilers` run after each pass (faults such as preemption, the cloud's state).

        `tick_s`: wall seconds between passes. 20 ms (20 simulated seconds at the tests' scale,
        under a training step): at 10 ms the passes took a quarter of an end-to-end test's CPU
        (tests/e2e/test_capacity.py: 83 CPU s against 63 at 20 ms, the same tests passing).

        `preemption` takes nodes away, each pass: flex-start nodes at the end of their max run
        duration (`Preemption.expire`), and any the test preempts. Pass the one the run's
        scripts watch (ClientFaults); by default the controller makes its own.

        `catch_up`: a sleep ends `seconds` after its step was due, not after the pass that ran
        it, so a script keeps its rate when a pass is slower than its sleeps (hundreds of pods:
        without it, one step per pass). Off by default: the steps a pass catches up run at
        once, and side effects that read the clock (a preemption's notice) see it unmoved.
        """
        self.emu, self.scenario, self.catch_up = emu, scenario or Scenario(), catch_up
        self.time_scale, self.tick_s = time_scale, tick_s
        self.reconcilers = reconcilers
        emu.ledger.clock = self.clock = SimClock(time_scale)
        self._runs: dict[str, _Run] = {}  # by pod uid
        self._job_seen: dict[str, float] = {}  # Job uid -> wall time it was first unsuspended
        self._terminating: dict[str, float] = {}  # pod uid -> wall time its kubelet removes it
        self._refused: dict[str, str] = {}  # Job uid -> the last pod creation refusal reported
        self.autoscaler = Autoscaler(
            emu,
            lambda: self.clock(),
            self.scenario.provisioning_delay_s,
            self.scenario.scale_down_idle_s,
            self.scenario.flex_max_run_s,
            lambda simulated: self.clock.wall_at(simulated),
        )
        if preemption is None:
            preemption = Preemption(emu, lambda: self.clock(), run_label="")
        self.preemption = preemption
        self.kueue, self.scheduler = Kueue(emu), Scheduler(emu, self.autoscaler)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list[BaseException] = []

    def __enter__(self) -> Controller:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Controller:
        self._thread = threading.Thread(target=self._loop, name="kube-controller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(5)
        for run in list(self._runs.values()):
            _kill(run)  # nothing the scripts started outlives the controller
        if self.errors:
            raise RuntimeError("controller failed") from self.errors[0]

    def _loop(self) -> None:
        while not self._stop.wait(self.tick_s):
            try:
                self.reconcile()
            except ApiError:
                continue  # an object vanished mid-tick (a delete raced us): next tick sees it
            except Exception as error:
                self.errors.append(error)
                raise

    def reconcile(self) -> None:
        """One pass: Kueue, JobSets, Jobs, the scheduler, the autoscaler, the kubelet's pods,
        then nodes taken away (ended run durations, preemptions) and the `reconcilers`."""
        self.kueue.reconcile()
        for jobset in self.emu.list_shared("jobsets"):
            self._reconcile_jobset(jobset)
        owned = self._pods_by_job()  # one list per pass, not one per Job (O(Jobs x pods))
        for job in self.emu.list_shared("jobs"):
            self._reconcile_job(job, owned.get(job["metadata"]["uid"], []))
        self.scheduler.schedule()
        self.autoscaler.reconcile()
        self._run_pods()
        self.preemption.expire()
        self.preemption.reconcile()
        for reconcile in self.reconcilers:
            reconcile()

    def _wall(self, simulated_s: float) -> float:
        return simulated_s * self.time_scale

    # -- Jobs -------------------------------------------------------------------------------

    def _pods_by_job(self) -> dict[str, list[dict[str, Any]]]:
        """Each Job's pods by the Job's uid: its controller-uid label and owner reference."""
        owned: dict[str, list[dict[str, Any]]] = {}
        for pod in self.emu.list_shared("pods"):
            uid = (pod["metadata"].get("labels") or {}).get("batch.kubernetes.io/controller-uid")
            if any(r.get("uid") == uid for r in pod["metadata"].get("ownerReferences", [])):
                owned.setdefault(uid, []).append(pod)
        return owned

    def _reconcile_job(self, job: dict[str, Any], owned: list[dict[str, Any]]) -> None:
        """Status, conditions and pods of one Job; `owned`: its pods at the start of the pass."""
        meta, spec, status = job["metadata"], job["spec"], job.get("status") or {}
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        if (
            _condition(job, "Complete")
            or _condition(job, "Failed")
            or meta.get("deletionTimestamp")
        ):
            return
        if spec.get("suspend"):
            # the deadline's clock stops, and restarts at the next resume (JobSpec
            # activeDeadlineSeconds: "reset when the Job is resumed again")
            self._job_seen.pop(uid, None)
            if not _condition(job, "Suspended"):
                self.emu.set_job_condition(
                    ns, name, "Suspended", reason="JobSuspended", message="Job suspended"
                )
            return
        if _condition(job, "Suspended"):
            self.emu.set_job_condition(
                ns, name, "Suspended", status="False", reason="JobResumed", message="Job resumed"
            )
        labels = meta.get("labels") or {}
        first_seen = self._job_seen.setdefault(uid, time.monotonic())
        delay = self._wall(self.scenario.admission_delay(name, labels))
        if time.monotonic() - first_seen < delay:
            return
        pods = [p for p in owned if p["metadata"]["namespace"] == ns]
        indexed = spec.get("completionMode") == "Indexed"
        completions = spec.get("completions") or spec.get("parallelism", 1)
        done = _phase_in(pods, "Succeeded")
        terminating = [p for p in pods if p["metadata"].get("deletionTimestamp")]
        active = [
            p
            for p in pods
            if p["status"].get("phase") in ("Pending", "Running") and p not in terminating
        ]
        failed = len(_phase_in(pods, "Failed")) + sum(
            s.get("restartCount", 0)
            for p in active
            for s in p["status"].get("containerStatuses", [])
        )
        done_indexes = sorted({_index(p) for p in done}) if indexed else []
        succeeded = len(done_indexes) if indexed else len(done)
        start = status.get("startTime") or kube_events.now()
        new_status: dict[str, Any] = {
            "startTime": start,
            "active": len(active),
            "ready": len([p for p in active if p["status"].get("phase") == "Running"]),
            "succeeded": succeeded,
            "failed": len(_phase_in(pods, "Failed")),
            "terminating": len(terminating),
            "uncountedTerminatedPods": {},
        }
        if indexed:
            new_status["completedIndexes"] = _ranges(done_indexes)
        deadline = spec.get("activeDeadlineSeconds")
        if failed > spec.get("backoffLimit", 6):
            self._fail_job(
                job,
                active,
                new_status,
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            )
        elif deadline and time.monotonic() - first_seen > self._wall(deadline):
            self._fail_job(
                job,
                active,
                new_status,
                "DeadlineExceeded",
                "Job was active longer than specified deadline",
            )
        elif succeeded >= completions:
            self.emu.patch_status("jobs", ns, name, {**new_status, "active": 0, "ready": 0})
            message = "Reached expected number of succeeded pods"
            for type_ in ("SuccessCriteriaMet", "Complete"):
                self.emu.set_job_condition(
                    ns, name, type_, reason="CompletionsReached", message=message
                )
            self._event(job, "Completed", "Job completed")
        else:
            self.emu.patch_status("jobs", ns, name, new_status)
            self._create_pods(job, pods, active, done_indexes, completions, indexed)

    def _create_pods(
        self,
        job: dict[str, Any],
        pods: list[dict[str, Any]],
        active: list[dict[str, Any]],
        done_indexes: list[int],
        completions: int,
        indexed: bool,
    ) -> None:
        room = min(job["spec"].get("parallelism", 1), completions) - len(active)
        if indexed:
            busy = set(done_indexes) | {_index(p) for p in active}
            wanted: list[int | None] = [i for i in range(completions) if i not in busy]
        else:
            wanted = [None] * (completions - len(_phase_in(pods, "Succeeded")) - len(active))
        for index in wanted[: max(room, 0)]:
            attempt = len([p for p in pods if _index(p) == index])
            try:
                pod = self.emu.create(_pod_from_job(job, index, attempt))
            except ApiError as refused:  # e.g. its service account does not exist
                if self._refused.get(job["metadata"]["uid"]) != str(refused):
                    self._refused[job["metadata"]["uid"]] = str(refused)
                    self._event(job, "FailedCreate", f"Error creating: {refused}", type_="Warning")
                return
            self._event(job, "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}")

    def _fail_job(
        self,
        job: dict[str, Any],
        active: list[dict[str, Any]],
        new_status: dict[str, Any],
        reason: str,
        message: str,
    ) -> None:
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        self.emu.set_job_condition(ns, name, "FailureTarget", reason=reason, message=message)
        for pod in active:
            self.emu.delete("pods", ns, pod["metadata"]["name"])
        self.emu.patch_status("jobs", ns, name, {**new_status, "active": 0, "ready": 0})
        self.emu.set_job_condition(ns, name, "Failed", reason=reason, message=message)
        self._event(job, reason, message, type_="Warning")

    def _event(self, obj: dict[str, Any], reason: str, message: str, type_: str = "Normal") -> None:
        self.emu.create(kube_events.event(obj, reason, message, "job-controller", type_))

    # -- JobSets ----------------------------------------------------------------------------

    def _reconcile_jobset(self, jobset: dict[str, Any]) -> None:
        meta, spec, status = jobset["metadata"], jobset["spec"], jobset.get("status") or {}
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        if status.get("terminalState") or meta.get("deletionTimestamp"):
            return
        restarts = status.get("restarts", 0)
        children = {
            j["metadata"]["name"]: j
            for j in self.emu.list_shared("jobs", ns, f"{JOBSET_PREFIX}jobset-name={name}")
            if any(r.get("uid") == uid for r in j["metadata"].get("ownerReferences", []))
        }
        if any(_condition(j, "Failed") for j in children.values()):
            if restarts < (spec.get("failurePolicy") or {}).get("maxRestarts", 0):
                for child in children:
                    self.emu.delete("jobs", ns, child, propagation_policy="Background")
                self.emu.patch_status("jobsets", ns, name, {"restarts": restarts + 1})
                return
            if "failurePolicy" not in spec:
                self._end_jobset(
                    ns,
                    name,
                    "Failed",
                    reason="FailedJobs",
                    message="jobset failed due to one or more job failures",
                )
                return
            self._end_jobset(
                ns,
                name,
                "Failed",
                reason="ReachedMaxRestarts",
                message="jobset failed due to reaching max number of restarts",
            )
            return
        in_order = (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"
        rj_status = []
        previous_ready = True
        for rjob in spec.get("replicatedJobs", []):
            jobs = [_jobset_job(jobset, rjob, i, restarts) for i in range(rjob.get("replicas", 1))]
            may_create = previous_ready or not in_order
            for job in jobs:
                current = children.get(job["metadata"]["name"])
                if current is None and may_create:
                    self.emu.create(job)
                elif current and current["spec"].get("suspend") != bool(spec.get("suspend")):
                    self._set_job_suspend(current, job, bool(spec.get("suspend")))
            mine = [
                children[j["metadata"]["name"]] for j in jobs if j["metadata"]["name"] in children
            ]
            ready = [j for j in mine if _job_ready(j)]
            previous_ready = len(ready) == len(jobs)
            rj_status.append(
                {
                    "name": rjob["name"],
                    "ready": len(ready),
                    "active": len([j for j in mine if (j.get("status") or {}).get("active")]),
                    "succeeded": len([j for j in mine if _condition(j, "Complete")]),
                    "failed": len([j for j in mine if _condition(j, "Failed")]),
                    "suspended": len([j for j in mine if j["spec"].get("suspend")]),
                }
            )
        self.emu.patch_status("jobsets", ns, name, {"replicatedJobsStatus": rj_status})
        policy = spec.get("successPolicy") or {}
        targets = policy.get("targetReplicatedJobs") or [r["name"] for r in spec["replicatedJobs"]]
        complete = [
            all(
                _condition(j, "Complete")
                for j in children.values()
                if j["metadata"]["labels"][f"{JOBSET_PREFIX}replicatedjob-name"] == target
            )
            and any(
                j["metadata"]["labels"][f"{JOBSET_PREFIX}replicatedjob-name"] == target
                for j in children.values()
            )
            for target in targets
        ]
        finished = any(complete) if policy.get("operator") == "Any" else all(complete)
        if children and finished:
            self._end_jobset(
                ns,
                name,
                "Completed",
                reason="AllJobsCompleted",
                message="jobset completed successfully",
            )

    def _set_job_suspend(
        self, current: dict[str, Any], wanted: dict[str, Any], suspend: bool
    ) -> None:
        """Suspend or resume a JobSet's Job; resuming takes the JobSet's scheduling directives
        (nodeSelector, tolerations: what Kueue added at admission) into the pod template."""
        patch: dict[str, Any] = {"suspend": suspend}
        if not suspend:
            pod_spec = wanted["spec"]["template"].get("spec") or {}
            directives = {k: pod_spec[k] for k in ("nodeSelector", "tolerations") if k in pod_spec}
            if directives:
                patch["template"] = {"spec": directives}
        meta = current["metadata"]
        self.emu.patch("jobs", meta["namespace"], meta["name"], {"spec": patch})

    def _end_jobset(self, ns: str, name: str, state: str, *, reason: str, message: str) -> None:
        """The JobSet's terminalState and its condition of the same type, as the controller sets."""
        self.emu.patch_status("jobsets", ns, name, {"terminalState": state})
        self.emu.set_jobset_condition(ns, name, state, reason=reason, message=message)

    # -- kubelet ----------------------------------------------------------------------------

    def _run_pods(self) -> None:
        now = time.monotonic()
        alive = set()
        scheduled = bool(self.emu.list_shared("nodes"))  # a cluster model: pods wait for a node
        for pod in self.emu.list_shared("pods"):
            uid = pod["metadata"]["uid"]
            alive.add(uid)
            if pod["metadata"].get("deletionTimestamp"):
                self._terminate(pod, now)
                continue
            if scheduled and not pod["spec"].get("nodeName"):
                continue
            run = self._runs.get(uid)
            if run is None:
                run = self._runs[uid] = self._new_run(pod, now)
            if run is not None and pod["status"].get("phase") in ("Succeeded", "Failed"):
                run.state = "Done"  # ended by someone else (the node shut down)
                _kill(run)
            if run is not None:
                self._advance(run, now)
        for uid in set(self._runs) - alive:
            _kill(self._runs.pop(uid))
        for uid in set(self._terminating) - alive:
            del self._terminating[uid]

    def _terminate(self, pod: dict[str, Any], now: float) -> None:
        """The kubelet stops a deleted pod's containers, then removes the pod (grace 0)."""
        meta = pod["metadata"]
        grace = meta.get("deletionGracePeriodSeconds") or 0
        due = self._terminating.setdefault(
            meta["uid"], now + self._wall(min(grace, self.scenario.terminate_s))
        )
        run = self._runs.get(meta["uid"])
        if run is not None:
            run.state = "Done"
            _kill(run)  # the container's process gets SIGKILL at once (a stopped one too)
        if now >= due:
            self.emu.delete("pods", meta["namespace"], meta["name"], grace_period_seconds=0)

    def _new_run(self, pod: dict[str, Any], now: float) -> _Run | None:
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        job = labels.get("batch.kubernetes.io/job-name")
        if job is None or pod["status"].get("phase") != "Pending":
            return None  # only pods the Job controller made are run
        index = labels.get(INDEX_LABEL)
        info = PodInfo(
            meta["namespace"],
            meta["name"],
            job,
            int(index) if index is not None else None,
            int(meta.get("annotations", {}).get("sandbox/attempt", 0)),
            dict(labels),  # the scripts' own: the pod is the emulator's stored object
        )
        restart = pod["spec"].get("restartPolicy") == "OnFailure"
        run = _Run(info, "", restart, due=now + self._wall(self.scenario.pending_s))
        self._load_script(run, pod)
        return run

    def _load_script(self, run: _Run, pod: dict[str, Any]) -> None:
        script = self.scenario.script_for(run.info)
        run.container = script.container or pod["spec"]["containers"][0]["name"]
        run.steps, run.position = list(script.steps), 0

    def _advance(self, run: _Run, now: float) -> None:
        ns, pod = run.info.namespace, run.info.pod
        if run.state == "Pending":
            if now < run.due:
                return
            self.emu.set_pod_phase(ns, pod, "Running")
            run.state, run.due = "Running", now
        if run.state == "Forever" and run.check is not None and now >= run.due:
            run.due = now + self._wall(run.every_s)
            try:
                run.check(run.info)
            except ContainerExit as ended:
                self.emu.append_log(ns, pod, run.container, ended.output)
                self._finish(run, ended.code, now)
        if run.state == "Attached":
            self._pump(run, now)
        while run.state == "Running" and now >= run.due:
            if run.position >= len(run.steps):
                self._finish(run, 0, now)
                return
            step = run.steps[run.position]
            run.position += 1
            if step.action == "log":
                text = step.text() if callable(step.text) else step.text
                self.emu.append_log(ns, pod, run.container, text)
            elif step.action == "sleep":
                run.due = (run.due if self.catch_up else now) + self._wall(step.seconds)
            elif step.action == "call" and step.fn:
                try:
                    step.fn(run.info)
                except ContainerExit as ended:
                    self.emu.append_log(ns, pod, run.container, ended.output)
                    self._finish(run, ended.code, now)
            elif step.action == "exit":
                self._finish(run, step.code, now)
            elif step.action == "forever":
                run.state, run.check, run.every_s = "Forever", step.fn, step.seconds
                run.due = now + self._wall(step.seconds)
            elif step.action == "attach" and step.start:
                try:
                    run.process = step.start(run.info)
                except ContainerExit as ended:
                    self.emu.append_log(ns, pod, run.container, ended.output)
                    self._finish(run, ended.code, now)
                    return
                run.state = "Attached"
                self._pump(run, now)

    def _pump(self, run: _Run, now: float) -> None:
        """An Attached container: its process's new output to the log; once it ended, exit
        code 0 goes on with the script (Running), another ends the container."""
        assert run.process is not None
        try:
            text, code = run.process.pump()
        except ContainerExit as ended:  # a side effect refused (its storage): the process dies
            _kill(run)
            text, code = ended.output, ended.code
        if text:
            self.emu.append_log(run.info.namespace, run.info.pod, run.container, text)
        if code is None:
            return
        run.process = None
        if code:
            self._finish(run, code, now)
        else:
            run.state, run.due = "Running", now

    def _finish(self, run: _Run, code: int, now: float) -> None:
        ns, pod = run.info.namespace, run.info.pod
        if code != 0 and run.on_failure_restart:
            current = self.emu.get("pods", ns, pod)
            if current is None:  # deleted while its container ran (a racing delete): no restart
                run.state = "Done"
                return
            self.emu.restart_container(ns, pod, run.container)
            run.info = PodInfo(**{**run.info.__dict__, "attempt": run.info.attempt + 1})
            self._load_script(run, current)
            run.state, run.check = "Running", None
            run.due = now + self._wall(self.scenario.crash_backoff_s)
            return
        self.emu.set_pod_phase(ns, pod, "Succeeded" if code == 0 else "Failed", exit_code=code)
        run.state = "Done"


def _kill(run: _Run | None) -> None:
    """Kill and reap the run's attached process, if any (None: a pod no Job made, never run)."""
    if run is None:
        return
    process, run.process = run.process, None
    if process is not None:
        process.kill()


def _condition(obj: dict[str, Any], type_: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == type_ and c["status"] == "True" for c in conditions)


def _phase_in(pods: list[dict[str, Any]], phase: str) -> list[dict[str, Any]]:
    return [p for p in pods if p["status"].get("phase") == phase]


def _index(pod: dict[str, Any]) -> int | None:
    value = (pod["metadata"].get("labels") or {}).get(INDEX_LABEL)
    return int(value) if value is not None else None


def _ranges(indexes: list[int]) -> str:
    """Kubernetes' completedIndexes format: `0-3,5`."""
    out: list[str] = []
    for i in indexes:
        if out and int(out[-1].split("-")[-1]) == i - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ",".join(out)


def _job_ready(job: dict[str, Any]) -> bool:
    status = job.get("status") or {}
    wanted = min(job["spec"].get("parallelism", 1), job["spec"].get("completions") or 1)
    return _condition(job, "Complete") or status.get("ready", 0) >= wanted


def _pod_from_job(job: dict[str, Any], index: int | None, attempt: int) -> dict[str, Any]:
    meta, template = job["metadata"], job["spec"]["template"]
    suffix = uuid.uuid4().hex[:5]
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    annotations = {
        **((template.get("metadata") or {}).get("annotations") or {}),
        "sandbox/attempt": str(attempt),
    }
    pod_spec = dict(template["spec"])
    name = f"{meta['name']}-{suffix}"
    if index is not None:
        labels[INDEX_LABEL] = annotations[INDEX_LABEL] = str(index)
        name = f"{meta['name']}-{index}-{suffix}"
        pod_spec["hostname"] = f"{meta['name']}-{index}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": pod_spec,
    }


def _jobset_job(
    jobset: dict[str, Any], rjob: dict[str, Any], job_index: int, restarts: int
) -> dict[str, Any]:
    meta, spec = jobset["metadata"], jobset["spec"]
    name = meta["name"]
    labels = {
        f"{JOBSET_PREFIX}jobset-name": name,
        f"{JOBSET_PREFIX}replicatedjob-name": rjob["name"],
        f"{JOBSET_PREFIX}replicatedjob-replicas": str(rjob.get("replicas", 1)),
        f"{JOBSET_PREFIX}job-index": str(job_index),
        f"{JOBSET_PREFIX}restart-attempt": str(restarts),
    }
    coordinator = spec.get("coordinator")
    if coordinator:
        labels[f"{JOBSET_PREFIX}coordinator"] = (
            f"{name}-{coordinator['replicatedJob']}-{coordinator.get('jobIndex', 0)}-"
            f"{coordinator.get('podIndex', 0)}.{name}"
        )
    template = rjob.get("template") or {}
    job_spec = dict(template.get("spec") or {})
    pod_template = dict(job_spec.get("template") or {})
    pod_meta = dict(pod_template.get("metadata") or {})
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **labels}
    pod_spec = dict(pod_template.get("spec") or {})
    if (spec.get("network") or {}).get("enableDNSHostnames"):
        pod_spec["subdomain"] = (spec.get("network") or {}).get("subdomain") or name
    job_spec["template"] = {**pod_template, "metadata": pod_meta, "spec": pod_spec}
    job_spec["suspend"] = bool(spec.get("suspend"))
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{name}-{rjob['name']}-{job_index}",
            "namespace": meta["namespace"],
            "labels": {**((template.get("metadata") or {}).get("labels") or {}), **labels},
            "ownerReferences": [
                {
                    "apiVersion": jobset["apiVersion"],
                    "kind": "JobSet",
                    "name": name,
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": job_spec,
    }
