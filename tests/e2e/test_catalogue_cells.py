"""A whole run on a non-tutorial catalogue cell of each TPU generation (issue 47): the run names
only the model and the TPU type; its cell gives the rest, the cluster gets that generation's
node pool, the backend and the training run on it, and the export is verified."""

from __future__ import annotations

import json

import pytest

from sandbox.cluster_model import POOL_LABEL
from sandbox.harness import SPOT, Sandbox, Workloads

# v6e, v5p and tpu7x: the sandbox project offers all three in us-east5-a (project_facts.py)
CELLS = [("llama3.1-8b", "v6e-8"), ("gpt-oss-20b", "v5p-64"), ("qwen3-30b-a3b-base", "tpu7x-128")]
STEPS = 6
WORKERS = "jobset.sigs.k8s.io/replicatedjob-name=worker"


@pytest.mark.parametrize(("model", "tpu_type"), CELLS, ids=[f"{m}@{t}" for m, t in CELLS])
def test_a_catalogue_cell_runs_to_a_verified_export(model, tpu_type, airflow_db, tmp_path):
    conf = {
        **SPOT,
        "zone": "us-east5-a",
        "model_name": model,
        "tpu_type": tpu_type,
        "num_batches": STEPS,
        "checkpoint_period": STEPS // 2,
    }
    with Sandbox(tmp_path).up() as box:
        result = box.run(conf)
    assert result.state == "success", result.why()
    assert result.xcoms["export.checkpoint_step"] == STEPS
    assert result.leftovers == []


def test_two_slices_run_one_trainer_and_one_sampler_slice(airflow_db, tmp_path):
    """num_slices 2 (cluster_nodepool_count): two TPU node pools, a JobSet of two worker Jobs
    each on a pool of its own, the Pathways resource manager told of two instances, and
    MaxText's trainer and sampler slice flags; the run exports."""
    slices = {"cluster_nodepool_count": 2, "num_trainer_slices": 1, "num_samplers_slices": 1}
    conf = {**SPOT, "num_batches": STEPS, "checkpoint_period": STEPS // 2, **slices}
    seen: dict[str, object] = {}
    with Sandbox(tmp_path).up() as box:

        def look() -> None:
            """While training runs: the backend's JobSet, and each worker Job's node pools."""
            [jobset] = box.emu.list("jobsets")
            seen["jobset"] = jobset
            seen["train"] = " ".join(
                " ".join(c.get("command") or [])
                for p in box.emu.list("pods")
                if "-train-" in p["metadata"]["name"]
                for c in p["spec"]["containers"]
            )
            pools: dict[str, set[str]] = {}
            for pod in box.emu.list("pods", label_selector=WORKERS):
                node = box.emu.get("nodes", "", pod["spec"]["nodeName"])
                job = pod["metadata"]["labels"]["job-name"]
                pools.setdefault(job, set()).add(node["metadata"]["labels"][POOL_LABEL])
            seen["pools"] = pools

        result = box.run(conf, Workloads(during_training=look))
    assert result.state == "success", result.why()
    assert result.xcoms["export.checkpoint_step"] == STEPS and result.leftovers == []
    head, workers = seen["jobset"]["spec"]["replicatedJobs"]
    assert workers["replicas"] == 2
    assert "--instance_count=2" in json.dumps(head)
    assert "num_trainer_slices=1" in seen["train"] and "num_samplers_slices=1" in seen["train"]
    jobs = seen["pools"]
    assert len(jobs) == 2 and all(len(pools) == 1 for pools in jobs.values()), jobs
    assert len(set.union(*jobs.values())) == 2, jobs
