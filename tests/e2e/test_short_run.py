"""A smoke run with the defaults: 1 or 20 training steps at the default checkpoint_period (25)
and max_training_restarts (2) are accepted and run to a verified export, validate warning that
a resume would start over."""

from __future__ import annotations

import pytest

from sandbox.harness import SETTINGS, Sandbox


@pytest.mark.parametrize("steps", [1, 20])
def test_a_short_run_with_the_defaults_exports(steps, airflow_db, tmp_path):
    conf = {
        k: v for k, v in SETTINGS.items() if k not in ("checkpoint_period", "max_training_restarts")
    }
    with Sandbox(tmp_path).up() as box:
        result = box.run({**conf, "num_batches": steps})
    assert result.state == "success", result.why()
    assert result.xcoms["export.checkpoint_step"] == steps
    assert result.leftovers == []
