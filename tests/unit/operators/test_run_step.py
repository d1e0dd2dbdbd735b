"""tpu_rl.operators.run_step: a step's declaration becomes its task (id, doc, tries, parse-time
limit), its layout is loaded once per run, and a GKE step is on the run's cluster by default."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tpu_rl.dag import runtime
from tpu_rl.dag.limits import setting_minutes
from tpu_rl.operators import RUN_CLUSTER
from tpu_rl.operators.run_step import OnRunCluster, RunStep
from tpu_rl.settings.params import default_settings


class DeclaredStep(RunStep):
    step_id = "declared"
    step_doc = "What the declared step does."
    limit = setting_minutes("training_timeout_minutes", 3)


def test_the_declaration_is_the_tasks_id_doc_tries_and_parse_time_limit():
    step = DeclaredStep()
    assert (step.task_id, step.doc_md, step.retries) == ("declared", DeclaredStep.step_doc, 2)
    minutes = default_settings().training_timeout_minutes
    assert step.execution_timeout == timedelta(minutes=minutes)
    assert DeclaredStep(task_id="other", retries=0).task_id == "other"


def test_the_layout_is_loaded_once_per_run_id(monkeypatch):
    loaded: list[str] = []

    def layout_from_context(context: dict) -> str:
        loaded.append(context["run_id"])
        return f"layout of {context['run_id']}"

    monkeypatch.setattr(runtime, "layout_from_context", layout_from_context)
    step = DeclaredStep()
    assert step.run_layout({"run_id": "a"}) == step.run_layout({"run_id": "a"}) == "layout of a"
    assert step.run_layout({"run_id": "b"}) == "layout of b"
    assert loaded == ["a", "b"]


def test_a_step_off_the_cluster_looks_at_no_tpu_node(monkeypatch):
    step = DeclaredStep()
    monkeypatch.setattr(step, "run_layout", lambda context: pytest.fail("read the layout"))
    step.look_at_tpu_nodes({})


class ClusterStep(OnRunCluster):
    step_id = "on_cluster"
    step_doc = "A step on the run's cluster."
    limit = setting_minutes("training_timeout_minutes", 1)


def test_a_gke_step_is_on_the_runs_cluster_with_the_deployments_connection(monkeypatch):
    monkeypatch.setenv("TPU_RL_GCP_CONN_ID", "gcp_of_the_deployment")
    step = ClusterStep()
    assert (step.project_id, step.location, step.cluster_name) == (
        RUN_CLUSTER["project_id"],
        RUN_CLUSTER["location"],
        RUN_CLUSTER["cluster_name"],
    )
    assert step.gcp_conn_id == "gcp_of_the_deployment" and not step.use_internal_ip
    named = ClusterStep(cluster_name="other", gcp_conn_id="mine")
    assert (named.cluster_name, named.gcp_conn_id) == ("other", "mine")
