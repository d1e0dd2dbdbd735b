"""The janitor reads its Variable when the sweep runs, not when its DAG file is parsed."""

from __future__ import annotations

import json
from unittest import mock

import pytest
from airflow.sdk.definitions.param import ParamsDict

from tpu_rl.janitor.params import JanitorParams, JanitorParamsError, janitor_params
from tpu_rl.operators.janitor import run_params


def test_the_dag_file_reads_no_variable_when_parsed():
    from tests.conftest import REPO

    source = (REPO / "dags" / "tpu_rl_janitor.py").read_text()
    assert "Variable.get" not in source and "import Variable" not in source


def _sweep_params(monkeypatch, variable: dict) -> JanitorParams:
    monkeypatch.setenv("AIRFLOW_VAR_TPU_RL_JANITOR_PARAMS", json.dumps(variable))
    params = ParamsDict(janitor_params()).dump()
    context = {"params": params, "dag_run": mock.Mock(conf={})}
    return JanitorParams.from_params(run_params(context))


@pytest.mark.parametrize("unset", [None, True])
def test_only_an_explicit_false_turns_deletion_on(monkeypatch, unset):
    base = {"project": "p", "region": "r"}
    assert _sweep_params(monkeypatch, {**base, "dry_run": unset}).dry_run is True
    assert _sweep_params(monkeypatch, {**base, "dry_run": False}).dry_run is False


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("dry_run", ""),
        ("dry_run", "false"),
        ("dry_run", 0),
        ("grace_minutes", "120"),
        ("grace_minutes", -5),
        ("clusters", "a,b"),
        ("project", 7),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_with_its_name(monkeypatch, name, value):
    with pytest.raises(JanitorParamsError, match=f"{name}: .*got {value!r}") as refused:
        _sweep_params(monkeypatch, {"project": "p", "region": "r", name: value})
    assert "nothing was inspected or removed" in str(refused.value)
