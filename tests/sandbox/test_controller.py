"""The simulated controller: Jobs, JobSets and scripted pods on the emulator."""

import time
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from sandbox.controller import Controller, Scenario
from sandbox.kube_emulator import KubeEmulator, running_emulator
from sandbox.pod_scripts import PodScript, exit, log, run_forever, sleep
from sandbox.workloads import (
    DEFAULT_POST,
    crashing_worker_script,
    grpo_client_script,
    pathways_server_script,
)
from tests.waits import wait_for

NS = "default"


@pytest.fixture
def emu() -> Iterator[KubeEmulator]:
    with running_emulator() as emulator:
        yield emulator


def job(name: str, completions: int = 1, restart: str = "Never", **spec: Any) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "completionMode": "Indexed",
            "completions": completions,
            "parallelism": completions,
            "template": {
                "spec": {"restartPolicy": restart, "containers": [{"name": "base", "image": "x"}]}
            },
            **spec,
        },
    }


def conditions(emu: KubeEmulator, plural: str, name: str) -> list[str]:
    obj = emu.get(plural, NS, name) or {}
    return [
        c["type"] for c in (obj.get("status") or {}).get("conditions", []) if c["status"] == "True"
    ]


def full_log(emu: KubeEmulator, pod: str, container: str = "base") -> str:
    _, log_ = emu.read_log(NS, pod, container)
    return log_.render(log_.select(), timestamps=False).decode()


def test_indexed_job_runs_to_complete(emu: KubeEmulator) -> None:
    scenario = Scenario(default=PodScript([log("hello\n"), sleep(10), exit(0)]))
    with Controller(emu, scenario):
        emu.create(job("job-conv", completions=3))
        wait_for(lambda: "Complete" in conditions(emu, "jobs", "job-conv"))
    pods = emu.list("pods", NS, "job-name=job-conv")
    assert sorted(p["metadata"]["name"].rsplit("-", 1)[0] for p in pods) == [
        "job-conv-0",
        "job-conv-1",
        "job-conv-2",
    ]
    labels = pods[0]["metadata"]["labels"]
    assert {"job-name", "batch.kubernetes.io/job-name", "controller-uid"} <= labels.keys()
    assert labels["batch.kubernetes.io/job-completion-index"] in {"0", "1", "2"}
    assert pods[0]["metadata"]["ownerReferences"][0]["kind"] == "Job"
    status = emu.get("jobs", NS, "job-conv")["status"]
    assert conditions(emu, "jobs", "job-conv") == ["SuccessCriteriaMet", "Complete"]
    assert (status["succeeded"], status["active"], status["completedIndexes"]) == (3, 0, "0-2")
    assert full_log(emu, pods[0]["metadata"]["name"]) == "hello\n"
    events = emu.list("events", NS, field_selector="involvedObject.name=job-conv")
    assert [e["reason"] for e in events].count("SuccessfulCreate") == 3


def test_suspended_job_waits_for_admission_and_late_pods(emu: KubeEmulator) -> None:
    scenario = Scenario().on("late", admit_after=300)
    with Controller(emu, scenario, time_scale=0.001):
        emu.create(job("job-kueue", suspend=True))
        wait_for(lambda: "Suspended" in conditions(emu, "jobs", "job-kueue"))
        assert emu.list("pods", NS, "job-name=job-kueue") == []
        emu.patch("jobs", NS, "job-kueue", {"spec": {"suspend": False}})
        wait_for(lambda: "Complete" in conditions(emu, "jobs", "job-kueue"))
        started = time.monotonic()
        emu.create(job("job-late"))
        wait_for(lambda: emu.list("pods", NS, "job-name=job-late"))
        assert time.monotonic() - started >= 0.3


def test_failing_pods_exhaust_backoff_limit(emu: KubeEmulator) -> None:
    scenario = Scenario().on("job-bad", PodScript([log("boom\n"), exit(2)]))
    with Controller(emu, scenario):
        emu.create(job("job-bad", backoffLimit=1))
        wait_for(lambda: "Failed" in conditions(emu, "jobs", "job-bad"))
    assert conditions(emu, "jobs", "job-bad") == ["FailureTarget", "Failed"]
    failed = emu.get("jobs", NS, "job-bad")["status"]
    assert failed["failed"] == 2 and failed["conditions"][-1]["reason"] == "BackoffLimitExceeded"
    pod = emu.list("pods", NS, "job-name=job-bad")[0]
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 2


def test_grpo_client_prints_maxtext_lines_and_writes_checkpoints(emu: KubeEmulator) -> None:
    written: list[str] = []
    script = grpo_client_script(
        base_output_directory="gs://b/gemma4-26b/trained/",
        checkpoint_period=25,
        write_object=lambda uri, data: written.append(uri),
    )
    with Controller(emu, Scenario().on("training", script), time_scale=0.0002):
        emu.create(job("job-training"))
        wait_for(lambda: "Complete" in conditions(emu, "jobs", "job-training"))
    text = full_log(emu, emu.list("pods", NS, "job-name=job-training")[0]["metadata"]["name"])
    marks = [
        "Pre RL Training: corr=8, total=64, accuracy=12.5%",
        "Intermediate Eval (step=10)",
        "RL Training Completed Successfully!",
        f"Post RL Training: {DEFAULT_POST.fields()}",
    ]
    assert [text.index(m) for m in marks] == sorted(text.index(m) for m in marks)
    post = next(line for line in text.splitlines() if "Post RL Training" in line)
    assert (
        post.startswith("W") and " train_rl.py:823] Post RL Training: corr=12, total=64, " in post
    )
    assert post.endswith(
        "accuracy=18.75%, partial_accuracy=20.3125%, format_accuracy=85.9375%, mean_reward=0.1234"
    )
    assert "gs://b/gemma4-26b/trained/rl/checkpoints/actor/50/model_params/_METADATA" in written
    assert any("/actor/25/" in uri for uri in written)
    assert not any("/actor/20/" in uri for uri in written)


@pytest.mark.parametrize(
    ("kwargs", "outcome", "absent"),
    [
        ({"post": None}, "Complete", "Post RL Training"),
        ({"exit_code": 1}, "Failed", None),
        ({"fail_at_step": 3}, "Failed", "RL Training Completed"),
    ],
)
def test_grpo_client_faults(
    emu: KubeEmulator, kwargs: dict, outcome: str, absent: str | None
) -> None:
    script = grpo_client_script(num_batches=5, **kwargs)
    with Controller(emu, Scenario().on("training", script), time_scale=0.0002):
        emu.create(job("job-training", backoffLimit=0))
        wait_for(lambda: outcome in conditions(emu, "jobs", "job-training"))
    text = full_log(emu, emu.list("pods", NS, "job-name=job-training")[0]["metadata"]["name"])
    assert absent is None or absent not in text


def pathways_jobset(name: str, workers: int = 2, worker_restart: str = "OnFailure") -> dict:
    def rjob(rname: str, replicas: int, pods: int, containers: list[str], restart: str) -> dict:
        return {
            "name": rname,
            "replicas": replicas,
            "template": {
                "spec": {
                    "completionMode": "Indexed", "completions": pods, "parallelism": pods,
                    "backoffLimit": pods * 4,
                    "template": {"spec": {"restartPolicy": restart,
                                          "containers": [{"name": c} for c in containers]}},
                }
            },
        }  # fmt: skip

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "network": {"enableDNSHostnames": True},
            "coordinator": {"replicatedJob": "pathways-head"},
            "startupPolicy": {"startupPolicyOrder": "InOrder"},
            "failurePolicy": {"maxRestarts": 0},
            "replicatedJobs": [
                rjob("pathways-head", 1, 1, ["pathways-proxy", "pathways-rm"], "Never"),
                rjob("worker", 1, workers, ["pathways-worker"], worker_restart),
            ],
        },
    }


def test_pathways_jobset_runs_in_order_and_cascades(emu: KubeEmulator) -> None:
    scenario = (
        Scenario()
        .on("pathways-head", pathways_server_script("resource_manager", "pathways-rm"))
        .on("worker", crashing_worker_script(after_s=20), index=1)
        .on("worker", PodScript([run_forever()]))
    )
    with Controller(emu, scenario):
        emu.create(pathways_jobset("pw"))
        workers = wait_for(
            lambda: emu.list("pods", NS, "jobset.sigs.k8s.io/replicatedjob-name=worker")
        )
        head = emu.list("pods", NS, "jobset.sigs.k8s.io/replicatedjob-name=pathways-head")[0]
        assert head["status"]["phase"] == "Running"  # InOrder: workers only after the head runs
        assert head["metadata"]["name"].startswith("pw-pathways-head-0-0-")
        assert (
            head["spec"]["hostname"] == "pw-pathways-head-0-0" and head["spec"]["subdomain"] == "pw"
        )
        labels = workers[0]["metadata"]["labels"]
        assert labels["jobset.sigs.k8s.io/jobset-name"] == "pw"
        assert labels["jobset.sigs.k8s.io/job-index"] == "0"
        assert labels["jobset.sigs.k8s.io/coordinator"] == "pw-pathways-head-0-0.pw"

        def restarted() -> bool:
            pods = emu.list("pods", NS, "batch.kubernetes.io/job-completion-index=1")
            statuses = pods[0]["status"].get("containerStatuses", []) if pods else []
            return bool(statuses) and statuses[0]["restartCount"] == 1

        wait_for(restarted)
        core = kubernetes.client.CoreV1Api(_client(emu))
        crashed = emu.list("pods", NS, "batch.kubernetes.io/job-completion-index=1")[0]
        previous = core.read_namespaced_pod_log(
            crashed["metadata"]["name"], NS, previous=True, _preload_content=False
        ).data.decode()
        assert "Check failed" in previous
        wait_for(lambda: emu.get("jobsets", NS, "pw")["status"].get("replicatedJobsStatus"))
        assert "Failed" not in conditions(emu, "jobsets", "pw")
        kubernetes.client.CustomObjectsApi(_client(emu)).delete_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", NS, "jobsets", "pw"
        )
        assert emu.list("jobs", NS) == [] and emu.list("pods", NS) == []


def test_jobset_completes_and_fails(emu: KubeEmulator) -> None:
    scenario = Scenario().on("bad-worker", PodScript([exit(1)]), index=0)
    with Controller(emu, scenario):
        emu.create(pathways_jobset("ok", workers=1))
        emu.create(pathways_jobset("bad", workers=1, worker_restart="Never"))
        wait_for(lambda: "Completed" in conditions(emu, "jobsets", "ok"))
        wait_for(lambda: "Failed" in conditions(emu, "jobsets", "bad"))
    assert emu.get("jobsets", NS, "ok")["status"]["terminalState"] == "Completed"
    failed = emu.get("jobsets", NS, "bad")["status"]
    assert (
        failed["terminalState"] == "Failed"
        and failed["conditions"][0]["reason"] == "ReachedMaxRestarts"
    )


def _client(emu: KubeEmulator) -> kubernetes.client.ApiClient:
    config = kubernetes.client.Configuration(
        host=emu.url, api_key={"authorization": f"Bearer {emu.token}"}
    )
    config.ssl_ca_cert = emu.ca_file
    return kubernetes.client.ApiClient(config)


@pytest.mark.parametrize(("catch_up", "lines"), [(False, 1), (True, 5)])
def test_catch_up_keeps_a_scripts_rate_when_a_pass_is_slower_than_its_sleeps(
    emu: KubeEmulator, catch_up: bool, lines: int
) -> None:
    """One pass 0.6 s after the pod started: 0.1 s sleeps run one step per pass, or all due."""
    script = PodScript([step for _ in range(5) for step in (sleep(0.1), log("x\n"))])
    scenario = Scenario(pending_s=0).on("paced", script)
    controller = Controller(emu, scenario, time_scale=1.0, catch_up=catch_up)
    emu.create(job("paced"))
    controller.reconcile()  # the pod is created, starts and sleeps
    time.sleep(0.6)
    controller.reconcile()
    (pod,) = emu.list("pods", NS)
    _, container_log = emu.read_log(NS, pod["metadata"]["name"], "base")
    assert len(container_log.records) == lines
