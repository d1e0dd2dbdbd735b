"""tpu_rl.operators.backend: stop_backend deletes the run's JobSet (already gone is fine), and
start_backend's rung holder is the backend JobSet (its wait and Kueue's admission:
tests/unit/backend/test_kueue.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tpu_rl.kube import objects
from tpu_rl.layout import RunLayout
from tpu_rl.operators.backend import StartPathwaysBackendOperator, StopPathwaysBackendOperator
from tpu_rl.settings.run_settings import load_settings


@pytest.fixture
def layout(tutorial_conf) -> RunLayout:
    return RunLayout(load_settings(tutorial_conf), "manual__b", "dep")


@pytest.mark.parametrize("deleted", [True, False])
def test_stop_deletes_the_runs_backend_jobset(layout, monkeypatch, deleted):
    calls: list[tuple] = []

    def delete_backend(api_client: object, namespace: str, name: str) -> bool:
        calls.append((api_client, namespace, name))
        return deleted

    monkeypatch.setattr(objects, "delete_backend", delete_backend)
    step = StopPathwaysBackendOperator(task_id="stop_backend")
    step.__dict__["custom"] = SimpleNamespace(api_client="the cluster's client")
    monkeypatch.setattr(step, "run_layout", lambda context: layout)
    assert step.execute({}) is deleted
    assert calls == [("the cluster's client", layout.settings.namespace, layout.backend_jobset)]


def test_the_rung_holder_is_the_backend_jobset(layout):
    kind, path = StartPathwaysBackendOperator(task_id="start_backend").rung_holder(layout)
    assert kind == f"JobSet {layout.backend_jobset}"
    assert path == objects.jobset_path(layout.settings.namespace, layout.backend_jobset)
