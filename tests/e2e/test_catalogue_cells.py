"""A whole run on a non-tutorial catalogue cell of each TPU generation (issue 47): the run names
only the model and the TPU type; its cell gives the rest, the cluster gets that generation's
node pool, the backend and the training run on it, and the export is verified."""

from __future__ import annotations

import pytest

from sandbox.harness import SPOT, Sandbox

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
