"""tpu_rl.preflight.vertex: preflight refuses the promotion settings promote would refuse."""

from __future__ import annotations

import pytest

from tests.support.vertex_settings import BAD, IDS
from tpu_rl.settings.run_settings import load_settings


@pytest.mark.parametrize(("env", "problem"), BAD, ids=IDS)
def test_preflight_refuses_it_too_with_the_fix(tutorial_conf, monkeypatch, env, problem):
    from tpu_rl.preflight.vertex import check_registry_settings

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    line = check_registry_settings(load_settings(tutorial_conf)).line()
    assert line.startswith("FAIL vertex registry: ") and problem in line
    assert "-> fix: fix the deployment's setting" in line
