"""tpu_rl.operators.janitor: the sweep's params (Params, the Variable, the run's conf), the
active runs' clusters it keeps, and its verdict (the sweep itself against the cluster's fakes:
tests/integration/test_cluster_toolkit.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from unittest import mock

import pytest
from airflow.providers.common.compat.sdk import AirflowException

from tpu_rl.names import Step
from tpu_rl.operators.janitor import RunStates, run_params, verdict


def test_the_variable_fills_what_the_run_did_not_set(monkeypatch):
    variable = {"project": "p-from-variable", "region": "r-from-variable", "dry_run": False}
    monkeypatch.setenv("AIRFLOW_VAR_TPU_RL_JANITOR_PARAMS", json.dumps(variable))
    params = {"project": "", "region": "r-from-conf", "dry_run": True, "grace_minutes": 120}
    context = {"params": params, "dag_run": mock.Mock(conf={"region": "r-from-conf"})}
    assert run_params(context) == {
        "project": "p-from-variable",  # a Param default: the Variable wins
        "region": "r-from-conf",  # set by the run: the run wins
        "dry_run": False,
        "grace_minutes": 120,  # in neither: the Param's default
    }


def test_without_the_variable_the_params_are_kept(monkeypatch):
    monkeypatch.delenv("AIRFLOW_VAR_TPU_RL_JANITOR_PARAMS", raising=False)
    context = {"params": {"project": "p"}, "dag_run": mock.Mock(conf=None)}
    assert run_params(context) == {"project": "p"}


class JanitorTI:
    """The Task SDK's view of the run DAG for the janitor: runs' counts, cleanup_cluster's
    states, validate's settings, and the sweep's report."""

    def __init__(self, active: set[str], cleanup: dict[str, str | None], total: int) -> None:
        self.active, self.cleanup, self.total = active, cleanup, total
        self.settings: dict[str, object] = {}
        self.report: object = None
        self.destroy_states: dict[str, str] = {}

    def get_dr_count(self, dag_id: str, states: list[str], run_ids: list[str] | None = None):
        return self.total if run_ids is None else sum(r in self.active for r in run_ids)

    def get_task_states(self, dag_id: str, task_ids: list[str], run_ids: list[str] | None = None):
        if task_ids == ["destroy_cluster"]:
            return {run_ids[0]: self.destroy_states}
        return {run_id: {Step.CLEANUP_CLUSTER: state} for run_id, state in self.cleanup.items()}

    def xcom_pull(self, task_ids: str, dag_id: str | None = None, run_id: str | None = None):
        return self.report if task_ids == "sweep" else self.settings.get(run_id)


def test_an_active_run_holds_the_cluster_it_validated():
    ti = JanitorTI({"r1"}, {"r1": None, "r2": "success", "r3": None}, total=1)
    ti.settings["r1"] = {"cluster_name": "c1"}
    states = RunStates(ti)
    assert states.active_clusters() == ({"c1": "r1"}, None)
    assert states.is_active("r1") and not states.is_active("r3")


def test_an_active_run_not_found_or_not_validated_keeps_every_cluster():
    states = RunStates(JanitorTI({"r1"}, {"r1": None}, total=2))
    assert states.active_clusters() == ({}, "1 active run(s) not found yet")
    unvalidated = RunStates(JanitorTI({"r1"}, {"r1": None}, total=1))
    assert unvalidated.active_clusters() == ({}, "active run r1 has not validated its settings yet")


def report(**fields: object) -> dict:
    base = {"dry_run": False, "failed": {}, "destroy": [], "destroy_settings": [{"x": 1}]}
    return base | fields


def test_the_verdict_reports_what_was_destroyed_without_the_destroy_settings():
    ti = JanitorTI(set(), {}, 0)
    ti.report = report(destroy=["c1"])
    ti.destroy_states = {"destroy_cluster_0": "success"}
    context = {"ti": ti, "dag": SimpleNamespace(dag_id="tpu_rl_janitor"), "run_id": "j1"}
    found = verdict(context)
    assert found["destroyed"] == ["c1"] and "destroy_settings" not in found


def test_the_verdict_fails_listing_what_could_not_be_removed():
    ti = JanitorTI(set(), {}, 0)
    ti.report = report(destroy=["c1", "c2"], failed={"job j": "403"})
    ti.destroy_states = {"destroy_cluster_0": "success", "destroy_cluster_1": "failed"}
    context = {"ti": ti, "dag": SimpleNamespace(dag_id="tpu_rl_janitor"), "run_id": "j1"}
    with pytest.raises(AirflowException) as refused:
        verdict(context)
    assert str(refused.value) == (
        "janitor could not remove: job j: 403; "
        "c2: gcluster destroy ended failed: see destroy_cluster[1]"
    )
    ti.report = None
    with pytest.raises(AirflowException, match="the sweep failed before it could report"):
        verdict(context)
