"""Fixtures of the unit tier shared by its packages' test modules (tests/conftest.py holds those
every tier shares; the emulators' are tests/integration/conftest.py's)."""

from __future__ import annotations

import pytest

from tests.support.wait_task import RESTARTS, new_sensor
from tpu_rl import storage
from tpu_rl.dag import runtime
from tpu_rl.layout import RunLayout
from tpu_rl.operators import rewards as run_rewards
from tpu_rl.settings.run_settings import load_settings


@pytest.fixture
def layout(tutorial_conf) -> RunLayout:
    """The tutorial's run (a module that needs another run defines its own `layout`)."""
    return RunLayout(load_settings(tutorial_conf), "manual__1", "test-deployment")


@pytest.fixture
def sensor(tutorial_conf, monkeypatch, gcs_objects):
    """The reward wait of a spot run that may resume twice, its restarts recorded in
    wait_task.RESTARTS (none made), its layout the tutorial's, its record in `gcs_objects`."""
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
