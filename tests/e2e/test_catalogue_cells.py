"""A whole run on a non-tutorial catalogue cell of each TPU generation: the run names
only the model and the TPU type; its cell gives the rest, the cluster gets that generation's
node pool, the backend and the training run on it, and the export is verified."""

from __future__ import annotations

import pytest

from sandbox.harness import SPOT, Sandbox
from tpu_rl.catalogue.cells import CELLS as ALL_CELLS
from tpu_rl.settings.run_settings import read_settings

# v6e, v5p and tpu7x: the sandbox project offers all three in us-east5-a (project_facts.py)
CELLS = [("llama3.1-8b", "v6e-8"), ("gpt-oss-20b", "v5p-64"), ("qwen3-30b-a3b-base", "tpu7x-128")]
STEPS = 6


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


def test_two_slices_are_refused_before_any_cloud_call(airflow_db, tmp_path, capfd):
    """MaxText 0.2.4 meshes no trainer and sampler slices: RLConfig keeps num_slices -1 for them,
    so the trainer's mesh asserts after both slices are up, whatever its axes; the tutorial
    cell's expert parallelism (4) would fail next (its training pod in the sandbox:
    sandbox/maxtext_mesh.py, tests/sandbox/test_maxtext_mesh.py). A two-slice run of every cell
    is refused by validate with the fix (one slice); the tutorial's before any cloud call."""
    slices = {"cluster_nodepool_count": 2, "num_trainer_slices": 1, "num_samplers_slices": 1}
    for cell in ALL_CELLS:
        cell_choice = {"model_name": cell.model_name, "tpu_type": cell.tpu_type}
        _, problems = read_settings({**SPOT, **slices, **cell_choice})
        assert problems and all("cluster_nodepool_count 1" in p for p in problems), problems
    with Sandbox(tmp_path).up() as box:
        result = box.run({**SPOT, **slices})
    assert result.state == "failed"
    assert result.task_states["validate"] == "failed", result.task_states
    assert result.calls == [] and result.clusters == {} and result.leftovers == []
    assert (
        "num_trainer_slices: 1 with num_samplers_slices 1: MaxText 0.2.4" in capfd.readouterr().out
    )
