"""tpu_rl.settings.capacity_rules: capacity, reservation and the checkpoints a resume needs."""

from __future__ import annotations

import pytest

from tests.support.settings import errors_for
from tpu_rl.settings.run_settings import (
    load_settings,
)


def test_capacity_defaults_are_the_tutorials_and_can_resume(tutorial_conf):
    """reservation as today; two resumes, so a checkpoint before the tutorial's last step 50
    (rl.yml's checkpoint_period 50 would leave only the last one)."""
    s = load_settings(tutorial_conf)
    assert (s.capacity, s.checkpoint_period, s.max_training_restarts) == ("reservation", 25, 2)
    assert s.checkpoint_period < s.num_batches


@pytest.mark.parametrize("capacity", ["flex_start", "spot"])
def test_preemptible_capacity_creates_a_cluster_without_a_reservation(tutorial_conf, capacity):
    assert errors_for(tutorial_conf, capacity=capacity, reservation="") == []
    assert errors_for(tutorial_conf, capacity=capacity, reservation=None) == []


@pytest.mark.parametrize("capacity", ["reservation", "flex_start", "spot"])
@pytest.mark.parametrize("period", [50, 60])
def test_a_resume_needs_a_checkpoint_before_the_last_step_whatever_the_capacity(
    tutorial_conf, capacity, period
):
    """Every mode resumes after lost capacity; a checkpoint at the last step only (50/50, the
    old defaults) or none (60/50) restores nothing, and validate says why."""
    conf = {**tutorial_conf, "capacity": capacity}
    if capacity != "reservation":
        conf["reservation"] = ""
    assert errors_for(conf, checkpoint_period=period, num_batches=50) == [
        f"checkpoint_period: {period} is not below num_batches 50, so training's only "
        "checkpoint is its last step's and a resume after lost TPU capacity "
        "(max_training_restarts=2) starts over from step 0; set checkpoint_period below "
        "num_batches (e.g. 25), or set max_training_restarts=0"
    ]
    assert errors_for(conf, checkpoint_period=period, max_training_restarts=0) == []
    assert errors_for(conf, checkpoint_period=49, num_batches=50) == []


def test_a_one_step_run_can_only_turn_resumes_off(tutorial_conf):
    errors = errors_for(tutorial_conf, num_batches=1, checkpoint_period=1)
    assert len(errors) == 1 and errors[0].endswith("step 0; set max_training_restarts=0")
    assert errors_for(tutorial_conf, num_batches=1, max_training_restarts=0) == []


@pytest.mark.parametrize("steps", [1, 20])
def test_a_short_run_with_default_checkpoints_is_accepted_with_a_warning(tutorial_conf, steps):
    """A 1- or 20-step smoke run with the defaults is not refused on checkpoint_period and
    max_training_restarts, fields the user never touched: it is accepted, and warned that it
    cannot resume. A period the user chose is still refused."""
    from tpu_rl.settings.validation import settings_warnings

    s = load_settings({**tutorial_conf, "num_batches": steps})
    [warning] = [w for w in settings_warnings(s) if "checkpoint_period" in w]
    assert f"num_batches {steps} is not above the default checkpoint_period 25" in warning
    assert "starts over from step 0" in warning
    chosen = errors_for(tutorial_conf, num_batches=steps, checkpoint_period=40)
    assert any(e.startswith("checkpoint_period: 40 is not below") for e in chosen), chosen
