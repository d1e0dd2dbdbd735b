"""Whole DAG runs in the sandbox: the run's final state, cleanup, and no token anywhere."""

from __future__ import annotations

from tests.sandbox.harness import SETTINGS


def test_success_with_a_new_cluster(sandbox):
    result = sandbox.run(dict(SETTINGS))
    assert result.task_states["run_succeeded"] == "success", result.task_states
    assert result.state == "success"
    assert result.leftovers == []
    assert result.clusters == {} or all(
        c.get("status") != "RUNNING" for c in result.clusters.values()
    )
