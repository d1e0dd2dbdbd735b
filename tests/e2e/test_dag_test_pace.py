"""The sandbox paces dag.test()'s passes (sandbox/dag_test_pace.py): a run refused at validate
marks its other tasks upstream_failed a level a pass, and each pass that found nothing to run
pauses PASS_PAUSE_S, not Airflow's second; a sleep of any other code lasts what it asked.

Before the pace (Sandbox.run calling dag.test() bare) the same run paused 1.0 s six times."""

from __future__ import annotations

import sys
import time

from sandbox.dag_test_pace import PASS_PAUSE_S, sandbox_paced_dag_test
from sandbox.harness import SETTINGS, Sandbox


def recorded_sleeps(monkeypatch) -> dict[str, list[float]]:
    """time.sleep's calls from here on, by the name of the code that asked for them (the pace's
    wrapper, once in place, sits between the two)."""
    real_sleep, calls = time.sleep, {}

    def recording_sleep(seconds: float) -> None:
        asked_by = sys._getframe(1)
        if asked_by.f_code.co_name == "sleep":  # the pace's wrapper
            asked_by = asked_by.f_back
        calls.setdefault(asked_by.f_code.co_name, []).append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", recording_sleep)
    return calls


def test_a_refused_runs_passes_pause_at_the_sandboxs_pace(airflow_db, tmp_path, monkeypatch):
    sleeps = recorded_sleeps(monkeypatch)
    refused = {**SETTINGS, "cluster_name": "-not-a-valid-name-"}
    with Sandbox(tmp_path).up() as box:
        result = box.run(refused)
    assert result.state == "failed" and result.task_states["validate"] == "failed", result
    pauses = sleeps.get("test", [])  # DAG.test's
    assert len(pauses) >= 3, sleeps  # a pass per level of the cascade below validate
    assert set(pauses) == {PASS_PAUSE_S}, sleeps


def test_any_other_sleep_lasts_what_it_asked(monkeypatch):
    sleeps = recorded_sleeps(monkeypatch)

    def a_poll_loop() -> None:
        time.sleep(0.01)

    with sandbox_paced_dag_test():
        a_poll_loop()
    assert sleeps == {"a_poll_loop": [0.01]}
