"""Training that survives capacity loss: the verdict (capacity lost or a real failure), the
capacity_lost event, and the resume decisions of the reward wait (limit, real error, first pre).

Fault shapes are GKE's: a preempted node's pods end Failed, reason
Terminated, with a DisruptionTarget condition; evicted pods; pods whose node is gone; a node
with the impending-node-termination taint. The GRPO client itself is never disrupted: it dies
with gRPC UNAVAILABLE, exit 1, exactly as it does on a real training error.
"""

from __future__ import annotations

from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from tests.conftest import MemoryObject
from tests.integration.test_reward_trigger import (  # noqa: F401 (fixtures)
    JOB,
    JOBSET,
    NS,
    C,
    creds,
    emu,
    follower,
    make_job,
    make_jobset,
    make_pod,
    pre,
    step,
)
from tpu_rl import storage
from tpu_rl.checkpoints import resume
from tpu_rl.dag import runtime
from tpu_rl.kube import verdicts
from tpu_rl.layout import RunLayout
from tpu_rl.operators import rewards as run_rewards
from tpu_rl.rewards.line_reader import Line, Resent, consume
from tpu_rl.settings.run_settings import load_settings
from tpu_rl.watch.state import FollowState

SHUTDOWN = "Pod was terminated in response to imminent node shutdown."
DISRUPTED = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "TerminationByKubelet",
    "message": SHUTDOWN,
}
TAINT = {"key": verdicts.IMPENDING_TERMINATION_TAINT, "value": "", "effect": "NoSchedule"}
WORKER_LABELS = {"jobset.sigs.k8s.io/jobset-name": JOBSET}


def pod(
    name: str = "w-0", node: str | None = "tpu-0", reason: str | None = None, **status: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": "Failed" if reason else "Running", "reason": reason, **status},
    }


def node(name: str, *taints: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"taints": list(taints)}}


# -- the verdict --------------------------------------------------------------------------------

PREEMPTED = pod(reason="Terminated", message=SHUTDOWN, conditions=[DISRUPTED])


@pytest.mark.parametrize(
    ("pods", "nodes", "says"),
    [
        ([PREEMPTED], [node("tpu-0")], "DisruptionTarget TerminationByKubelet"),
        ([pod(conditions=[DISRUPTED])], None, "DisruptionTarget"),  # condition before the end
        ([pod(reason="Evicted", message="The node was low on resource")], [], "Evicted"),
        ([pod(reason="NodeShutdown")], [], "NodeShutdown"),
        ([pod(node="tpu-7")], [node("tpu-0")], "its node tpu-7 no longer exists"),
        ([pod(node="tpu-0")], [node("tpu-0", TAINT)], "impending-node-termination"),
    ],
    ids=["terminated", "disruption_target", "evicted", "node_shutdown", "node_gone", "notice"],
)
def test_capacity_loss_is_read_from_pods_and_nodes(pods, nodes, says):
    nodes = None if nodes is None else [node("cpu-0"), *nodes]
    evidence = verdicts.capacity_evidence([pod("client", node="cpu-0"), *pods], nodes)
    assert evidence is not None and says in evidence, evidence


def test_a_client_exception_without_evidence_is_a_real_failure():
    client = pod("client", node="cpu-0", reason=None)
    client["status"].update(phase="Failed", containerStatuses=[{"state": {"terminated": {}}}])
    other_taint = {"key": "google.com/tpu", "effect": "NoSchedule"}
    nodes = [node("cpu-0"), node("tpu-0", other_taint)]
    assert verdicts.capacity_evidence([client, pod("w-0"), pod("w-1", node=None)], nodes) is None
    # without the right to list nodes, a vanished node cannot be seen: the pods alone decide
    assert verdicts.capacity_evidence([pod(node="tpu-7")], None) is None


def test_the_highest_step_the_log_showed_is_kept():
    state = FollowState()
    lines = [
        "2026-12-01T10:00:01Z I1201 peft_trainer.py:735] Train step 59 training loss: "
        "0.012345  - training perplexity: 1.012421",
        "2026-12-01T10:00:02Z W1201 hooks.py:98] Intermediate Eval (step=60): corr=1",
    ]
    consume(state, [Line(text) for text in lines], Resent(), _Log())
    assert state.reached_step == 60  # the evaluation: a step line's fallback
    later = "2026-12-01T10:00:03Z I1201 peft_trainer.py:735] Train step 61 training loss: nan  "
    consume(state, [Line(later + "- training perplexity: nan")], Resent(), _Log())
    assert state.reached_step == 61


class _Log:
    def info(self, *args: Any) -> None: ...

    def warning(self, *args: Any) -> None: ...


# -- the capacity_lost event, against the Kubernetes API emulator --------------------------------


def preempted_backend(cluster, *, node_exists: bool = True) -> None:
    """A client that logged Pre and step 60, a backend worker on node tpu-0 of the slice."""
    make_job(cluster)
    make_pod(cluster, "train-a")
    cluster.append_log(NS, "train-a", C, pre() + step(60))
    make_jobset(cluster)
    make_pod(cluster, f"{JOBSET}-worker-0-0", labels=WORKER_LABELS)
    cluster.patch("pods", NS, f"{JOBSET}-worker-0-0", {"spec": {"nodeName": "tpu-0"}})
    if node_exists:
        cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "tpu-0"}})


@pytest.mark.asyncio
async def test_a_preempted_backend_worker_is_capacity_lost_with_pre_and_step(emu, creds):  # noqa: F811
    preempted_backend(emu)
    f = follower(emu, backend_jobset_name=JOBSET)
    assert await f.poll() is None
    emu.set_pod_phase(
        NS,
        f"{JOBSET}-worker-0-0",
        "Failed",
        exit_code=143,
        conditions=[DISRUPTED],
        pod_reason="Terminated",
        message=SHUTDOWN,
    )
    event = await f.poll()
    assert event is not None and event["reason"] == "capacity_lost", event
    assert "DisruptionTarget" in event["message"] and "backend pod" in event["message"]
    assert event["pre"]["mean_reward"] == -0.2031 and event["reached_step"] == 60


@pytest.mark.asyncio
async def test_a_client_death_with_its_backend_node_gone_is_capacity_lost(emu, creds):  # noqa: F811
    preempted_backend(emu, node_exists=False)
    f = follower(emu, backend_jobset_name=JOBSET)
    emu.set_pod_phase(NS, "train-a", "Failed", exit_code=1)
    event = await f.poll()
    assert event is not None and event["reason"] == "capacity_lost", event
    assert "its node tpu-0 no longer exists" in event["message"]


@pytest.mark.asyncio
async def test_a_client_exception_on_a_healthy_backend_is_a_real_failure(emu, creds):  # noqa: F811
    preempted_backend(emu)
    f = follower(emu, backend_jobset_name=JOBSET)
    emu.append_log(NS, "train-a", C, "jaxlib.xla_extension.XlaRuntimeError: UNAVAILABLE\n")
    emu.set_pod_phase(NS, "train-a", "Failed", exit_code=1)
    event = await f.poll()
    assert event is not None and event["reason"] == "pod_failed", event


# -- the resume decisions ----------------------------------------------------------------------


class Ti:
    """The wait's task instance: its own XComs."""

    task_id = "wait_for_rewards"

    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value

    def xcom_pull(self, task_ids: str, key: str = "return_value") -> Any:
        assert task_ids == self.task_id
        return self.pushed.get(key)


BASE_PRE = {"mean_reward": 0.0821, "accuracy": 12.5}
RESTORED_PRE = {"mean_reward": 0.1, "accuracy": 15.0}
POST = {"mean_reward": 0.1234, "accuracy": 18.75}


RESTARTS: list[int] = []


def new_sensor() -> run_rewards.WaitForRewardsSensor:
    """The wait as a new try (or a new worker after a restart) builds it: a new instance."""
    op = run_rewards.WaitForRewardsSensor(
        task_id="wait_for_rewards", project_id="p", location="l", cluster_name="c"
    )
    op.restarts = RESTARTS  # type: ignore[attr-defined]
    return op


@pytest.fixture
def sensor(tutorial_conf, monkeypatch, gcs_objects):
    conf = {**tutorial_conf, "capacity": "spot", "reservation": "", "max_training_restarts": 2}
    layout = RunLayout(load_settings(conf), "manual__1", "test-deployment")
    monkeypatch.setattr(runtime, "layout_from_context", lambda context: layout)
    monkeypatch.setattr(storage, "newest_committed_step", lambda uri, conn: (50, [60]))
    cls = run_rewards.WaitForRewardsSensor
    RESTARTS.clear()
    monkeypatch.setattr(cls, "restart", lambda op, c, lay, h, *_: RESTARTS.append(h.resumes))
    monkeypatch.setattr(cls, "release_tpus", lambda op: None)
    monkeypatch.setattr(cls, "mask_token", lambda op: None)
    return new_sensor()


def saved_history(sensor: run_rewards.WaitForRewardsSensor) -> resume.History:
    """The history as the run's record in GCS holds it."""
    return resume.History.load(sensor.attempts_record)


def lost(pre: dict | None, reached: int) -> dict[str, Any]:
    return {
        "status": "error",
        "reason": "capacity_lost",
        "message": "pod w-3: DisruptionTarget TerminationByKubelet; backend failed\nlog lines",
        "pre": pre,
        "reached_step": reached,
        "backend_created": "2026-12-01T10:00:00Z",
    }


def test_resumes_from_the_newest_complete_step_and_keeps_the_first_pre(sensor, capsys):
    context = {"ti": Ti()}
    sensor.execute_complete(context, lost(BASE_PRE, 60))
    assert sensor.restarts == [1]  # one resume open: the new attempt
    said = "Resuming training from checkpoint step 50 (resume 1 of 2) after capacity loss: pod"
    assert said in capsys.readouterr().out
    history = saved_history(sensor)
    assert history.resuming and [a["resumed_from_step"] for a in history.attempts] == [None, 50]
    assert context["ti"].pushed["attempts"][0]["outcome"] == "capacity_lost"
    success = {"status": "success", "pre": RESTORED_PRE, "post": POST, "post_time": "t"}
    result = sensor.execute_complete(context, {**success, "reached_step": 100})
    assert result["pre"] == BASE_PRE and result["post"] == POST  # the gate's baseline
    assert [(a["outcome"], a["reached_step"]) for a in result["attempts"]] == [
        ("capacity_lost", 60),
        ("completed", 100),
    ]
    assert result["attempts"][0]["started"] == "2026-12-01T10:00:00Z"


def test_capacity_lost_more_often_than_allowed_fails_naming_the_attempts(sensor):
    context = {"ti": Ti()}
    sensor.execute_complete(context, lost(BASE_PRE, 60))
    sensor.execute_complete(context, lost(RESTORED_PRE, 70))
    with pytest.raises(AirflowFailException, match="lost its TPU capacity 3 times") as failed:
        sensor.execute_complete(context, lost(RESTORED_PRE, 80))
    assert "max_training_restarts=2" in str(failed.value) and "attempt 3" in str(failed.value)
    assert sensor.restarts == [1, 2]
    assert [a["outcome"] for a in context["ti"].pushed["attempts"]] == ["capacity_lost"] * 3


def test_a_real_training_error_is_not_resumed(sensor):
    context = {"ti": Ti()}
    error = {"status": "error", "reason": "pod_failed", "message": "exit 1", "pre": BASE_PRE}
    with pytest.raises(AirflowFailException, match="pod_failed"):
        sensor.execute_complete(context, error)
    assert sensor.restarts == []
    assert [a["outcome"] for a in context["ti"].pushed["attempts"]] == ["failed"]


def test_a_retry_during_a_resume_finishes_it(sensor, gcs_objects, tutorial_conf):
    layout = RunLayout(load_settings(tutorial_conf), "manual__1", "test-deployment")
    resume.History(attempts=[], resuming=True).save(
        MemoryObject(gcs_objects, layout.training_attempts)
    )
    sensor.execute({"ti": Ti()})
    assert sensor.restarts == [0]


def test_a_resumed_run_keeps_its_attempts_and_first_pre_across_tries(
    sensor, gcs_objects, tutorial_conf
):
    """No task state store (Airflow before 3.3): the record in the run's GCS folder carries the
    attempts and the base model's Pre line to the next try, in a new process."""
    sensor.execute_complete({"ti": Ti()}, lost(BASE_PRE, 60))
    assert sensor.restarts == [1]
    layout = RunLayout(load_settings(tutorial_conf), "manual__1", "test-deployment")
    assert list(gcs_objects) == [f"{layout.trained_dir}{layout.slug}/training_attempts.json"]
    assert (
        RunLayout(layout.settings, "manual__2", "test-deployment").training_attempts
        not in gcs_objects
    )
    success = {"status": "success", "pre": RESTORED_PRE, "post": POST, "post_time": "t"}
    result = new_sensor().execute_complete({"ti": Ti()}, {**success, "reached_step": 100})
    assert result["pre"] == BASE_PRE  # the gate's baseline, not the restored model's
    assert [a["outcome"] for a in result["attempts"]] == ["capacity_lost", "completed"]


def test_a_resumed_backend_that_never_runs_fails_the_wait_and_ends_its_attempt(sensor):
    context = {"ti": Ti()}
    sensor.execute_complete(context, lost(BASE_PRE, 60))
    timeout = {"status": "error", "reason": "pending_timeout", "message": "0/9 pods running"}
    with pytest.raises(AirflowFailException, match="resume 1: 0/9 pods running"):
        sensor.resume_training(context, timeout)
    history = saved_history(sensor)
    assert not history.resuming
    assert [a["outcome"] for a in context["ti"].pushed["attempts"]] == ["capacity_lost", "failed"]


# -- the health resume (health_action=resume) ---------------------------------------------------


def test_a_health_resume_is_told_from_the_attempts():
    history = resume.History()
    history.begin(None, 8, started=None)
    assert not resume.health_resumed(history)
    history.begin(30, 8, started=None)
    history.attempts[-1][resume.HEALTH_RESUME] = {"anomaly_step": 40, "moved": None}
    assert resume.health_resumed(history)


def test_the_poisoned_attempts_evaluations_from_the_anomaly_step_on_are_dropped():
    lines = [
        {"kind": "pre", "attempt": 1, "step": 0},
        {"kind": "intermediate", "attempt": 1, "step": 30},
        {"kind": "intermediate", "attempt": 1, "step": 40},
        {"kind": "post", "attempt": 1, "step": None},
        {"kind": "intermediate", "attempt": 2, "step": 40},
    ]
    kept = resume.without_poisoned(lines, 1, 40)
    assert [(e["attempt"], e["step"]) for e in kept] == [(1, 0), (1, 30), (1, None), (2, 40)]


def test_the_health_resume_line_says_what_changes():
    line = resume.health_resume_line(30, "gs://b/r/checkpoints/actor/30/", [40], "gs://b/r/q/")
    assert line.startswith(
        "Resuming training from healthy checkpoint step 30 (gs://b/r/checkpoints/actor/30/) on "
        "the same slice: the save of step 40 moved to gs://b/r/q/; the watchdog starts afresh; "
        "health_action is stop for this attempt"
    )
    assert "no save at or after the anomaly step" in resume.health_resume_line(None, None, [], "")
