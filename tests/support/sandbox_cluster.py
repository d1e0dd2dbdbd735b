"""The sandbox's cluster as its own tests drive it (tests/sandbox): the namespace, the bucket, the
tutorial's blueprint vars and TPU pool, TPU Jobs as the Pathways workers, the backend and the
GRPO client as the product names them, `gcluster deploy` of the tutorial's blueprint, and a wait
long enough for a whole simulated training on a loaded machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from sandbox.cloud import SANDBOX_BIN, sandbox_env
from sandbox.harness import RUN_LABEL
from sandbox.kube_emulator import KubeEmulator
from sandbox.paths import BLUEPRINT_FIXTURES
from tests.waits import wait_for as wait_briefly

NS = "default"
BUCKET = "capacity-bucket"
TRAINED = f"gs://{BUCKET}/gemma4-26b/trained/"
VARS = {"deployment_name": "c1", "project_id": "p", "zone": "us-east5-b", "num_slices": 1,
        "tpu_topology": "4x8"}  # fmt: skip
TPU_POOL = "gke-tpu-v6e-pool"
wait_for = partial(wait_briefly, timeout=20.0)  # a loaded machine: whole simulated trainings


def full_log(emu: KubeEmulator, pod: str) -> str:
    _, log_ = emu.read_log(NS, pod, "grpo")
    return log_.render(log_.select(), timestamps=False).decode()


def tpu_nodes(emu: KubeEmulator) -> list[dict[str, Any]]:
    return [n for n in emu.list("nodes") if "google.com/tpu" in n["status"]["allocatable"]]


def tpu_job(name: str, hosts: int = 8, restart: str = "Never", **spec: Any) -> dict[str, Any]:
    """An indexed Job with one pod per TPU host, as the Pathways workers of a v6e-32."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": {RUN_LABEL: "rl-1"}},
        "spec": {
            "completionMode": "Indexed",
            "completions": hosts,
            "parallelism": hosts,
            "template": {"metadata": {"labels": {RUN_LABEL: "rl-1"}}, "spec": tpu_pod(restart)},
            **spec,
        },
    }


def tpu_pod(restart: str) -> dict[str, Any]:
    return {
        "restartPolicy": restart,
        "nodeSelector": {"cloud.google.com/gke-tpu-topology": "4x8"},
        "tolerations": [{"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [
            {"name": "worker", "image": "x", "resources": {"limits": {"google.com/tpu": "4"}}}
        ],
    }


def backend_and_client(num_batches: int = 30) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Pathways-like JobSet (8 workers, OnFailure, backoffLimit 32, maxRestarts 0) and the
    GRPO client Job on a CPU node, named as the product names them."""
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "rl-1-backend", "namespace": NS, "labels": {RUN_LABEL: "rl-1"}},
        "spec": {
            "failurePolicy": {"maxRestarts": 0},
            "replicatedJobs": [
                {
                    "name": "worker",
                    "replicas": 1,
                    "template": {
                        "spec": tpu_job("w", restart="OnFailure", backoffLimit=32)["spec"]
                    },
                }
            ],
        },
    }
    command = (
        f"python3 -m maxtext.trainers.post_train.rl.train_rl run_name=rl-1 "
        f"base_output_directory={TRAINED} num_batches={num_batches} checkpoint_period=10"
    )
    client = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "rl-1-train", "namespace": NS, "labels": {RUN_LABEL: "rl-1"}},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {RUN_LABEL: "rl-1"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "grpo", "image": "x", "command": ["bash", "-c", command]}
                    ],
                },
            },
        },
    }  # fmt: skip
    return jobset, client


def deploy_tutorial_blueprint(
    tmp_path: Path, edits: dict[str, Any], fault: str = "", used: tuple[dict[str, Any], ...] = ()
) -> tuple[subprocess.CompletedProcess, str]:
    """`gcluster deploy` (the fake) of the tutorial's blueprint with its TPU pool's settings
    edited (a None value drops the setting) and the `used` modules added before the pool, which
    uses them; what it printed, and the cluster's status in the sandbox's cloud."""
    bp = yaml.safe_load((BLUEPRINT_FIXTURES / "gke-tpu-v6e-advanced.yaml").read_text())
    bp["vars"].update(VARS, region="us-east5", reservation="r1", kueue_configuration_path="")
    for group in bp["deployment_groups"]:
        for module in list(group["modules"]):
            if module["source"] == "modules/compute/gke-node-pool":
                module["settings"].update(edits)
                for key in [k for k, v in edits.items() if v is None]:
                    module["settings"].pop(key)
                at = group["modules"].index(module)
                group["modules"][at:at] = list(used)
                module["use"] = [*module.get("use", []), *(m["id"] for m in used)]
    (tmp_path / "bp.yaml").write_text(yaml.safe_dump(bp))
    env = {**os.environ, **sandbox_env(tmp_path, "http://unused", "http://unused"),
           "FAKE_GCLUSTER_FAIL": fault}  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(SANDBOX_BIN / "gcluster"), "deploy", "bp.yaml", "--auto-approve"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    status = json.loads((tmp_path / "cloud.json").read_text())["clusters"]["c1"]["status"]
    return done, status
