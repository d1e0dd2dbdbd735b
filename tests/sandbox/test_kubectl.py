"""The emulator driven by the real kubectl: get, watch, logs -f and a foreground delete.

`make test` installs Debian's kubernetes-client first (as root, like chromium); elsewhere the
test is skipped when kubectl is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from sandbox.cluster_model import ClusterModel
from sandbox.controller import Controller, Scenario
from sandbox.kube_emulator import KubeEmulator, running_emulator
from sandbox.pod_scripts import PodScript, exit, log, run_forever, sleep

KUBECTL = shutil.which("kubectl")
if KUBECTL is None and os.geteuid() != 0:
    pytest.skip(
        "kubectl is not installed and this is not root: `sudo make kubectl` installs Debian's "
        "kubernetes-client",
        allow_module_level=True,
    )
VARS = {
    "project_id": "proj",
    "deployment_name": "kc",
    "zone": "us-east5-b",
    "num_slices": 1,
    "tpu_topology": "4x8",
}


@pytest.fixture
def emu() -> Iterator[KubeEmulator]:
    with running_emulator() as emulator:
        ClusterModel.described(VARS).provision(emulator)
        yield emulator


def kubeconfig(emu: KubeEmulator, directory: Path) -> Path:
    """What `gcloud container clusters get-credentials` writes, with a static token."""
    path = directory / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "sandbox",
                        "cluster": {"server": emu.url, "certificate-authority": emu.ca_file},
                    }
                ],
                "users": [{"name": "sandbox", "user": {"token": emu.token}}],
                "contexts": [
                    {"name": "sandbox", "context": {"cluster": "sandbox", "user": "sandbox"}}
                ],
                "current-context": "sandbox",
            }
        )
    )
    return path


def job(name: str, grace_s: int = 30) -> dict:
    container = {"name": "main", "image": "busybox", "resources": {"limits": {"cpu": "1"}}}
    pod_spec = {
        "restartPolicy": "Never",
        "containers": [container],
        "terminationGracePeriodSeconds": grace_s,
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"template": {"spec": pod_spec}},
    }


def test_kubectl_get_watch_logs_and_foreground_delete(emu: KubeEmulator, tmp_path: Path) -> None:
    assert KUBECTL is not None, "kubectl missing although root: run `make kubectl`"
    env = {**os.environ, "KUBECONFIG": str(kubeconfig(emu, tmp_path)), "HOME": str(tmp_path)}

    def kubectl(*args: str, timeout: float = 60) -> str:
        done = subprocess.run(
            [KUBECTL, *args], env=env, capture_output=True, text=True, timeout=timeout
        )
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    printer = PodScript([log("step 1\n"), sleep(500), log("step 2\n"), sleep(500), exit(0)])
    scenario = (
        Scenario(pending_s=0, terminate_s=1000)
        .on("printer", printer)
        .on("server", PodScript([log("serving\n"), run_forever()]))
    )
    with Controller(emu, scenario, time_scale=0.001):
        watch = subprocess.Popen(
            [KUBECTL, "get", "jobs", "--watch", "-o", "name"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            # the watch is open before the Job is made: kubectl lists the Jobs, then watches
            # from the list's resourceVersion (the emulator replays every change since it)
            _until(lambda: [r for r in list(emu.requests) if r.path.endswith("/jobs")])
            emu.create(job("printer"))
            pod = _until(lambda: kubectl("get", "pods", "-o", "name").strip())
            assert pod.startswith("pod/printer-")
            followed = kubectl("logs", "-f", pod)
            assert followed == "step 1\nstep 2\n"
            _until(
                lambda: (
                    "Complete"
                    in kubectl(
                        "get", "job", "printer", "-o", "jsonpath={.status.conditions[*].type}"
                    )
                )
            )
            table = kubectl("get", "jobs")
            assert "printer" in table.splitlines()[1]
        finally:
            watch.terminate()
            out, _ = watch.communicate(timeout=10)
        lines = out.splitlines()  # the ADDED event, then the Job's status changes as they came
        assert lines[0] == "job.batch/printer" and len(lines) >= 3 and set(lines) == {lines[0]}

        emu.create(job("server", grace_s=1000))
        server_pod = _until(lambda: _running(emu, "server"))
        started = time.monotonic()
        kubectl("delete", "job", "server", "--cascade=foreground")
        took = time.monotonic() - started
        deletes = [r for r in emu.requests if r.method == "DELETE" and r.path.endswith("/server")]
        assert deletes and deletes[0].status == 202  # Foreground: accepted, still Terminating
        assert emu.get("jobs", "default", "server") is None
        assert emu.get("pods", "default", server_pod) is None
        assert took >= 0.9  # it waited out the pod's termination (1000 simulated s = 1 s)


def _running(emu: KubeEmulator, job_name: str) -> str | None:
    for pod in emu.list("pods", label_selector=f"job-name={job_name}"):
        if pod["status"].get("phase") == "Running":
            return pod["metadata"]["name"]
    return None


def _until(probe, timeout: float = 20.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = probe()
        except AssertionError:
            value = None
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
