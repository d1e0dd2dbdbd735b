"""The DAG as Airflow loads it: graph, trigger rules, Params, and the Jobs it would submit."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest
import yaml
from airflow.dag_processing.dagbag import DagBag
from airflow.providers.google.cloud.operators.kubernetes_engine import GKEStartJobOperator
from kubernetes.client import ApiClient

from tests.conftest import REPO
from tpu_rl.layout import RunLayout
from tpu_rl.operators.jobs import RunJobOperator
from tpu_rl.plan import write_plan
from tpu_rl.settings import SETTING_FIELDS, load_settings

DAG_ID = "tpu_rl_post_training"
RUN_ID = "manual__2026-11-29T10:00:00+00:00"
WORK = [
    "validate",
    "ensure_bucket",
    "create_cluster",
    "hf_token_secret",
    "convert",
    "start_backend",
    "train",
    "wait_for_rewards",
    "stop_backend",
    "gate",
    "export",
    "verify",
]


@pytest.fixture(scope="module")
def dag():
    bag = DagBag(str(REPO / "dags"))
    assert bag.import_errors == {}
    return bag.dags[DAG_ID]


def test_work_runs_in_the_tutorials_order(dag):
    for before, after in itertools.pairwise(WORK):
        assert before in dag.get_task(after).upstream_task_ids, (before, after)


def test_cleanup_always_runs_after_all_work_and_the_run_state_tells_the_truth(dag):
    cleanup = dag.get_task("cleanup_kubernetes")
    assert cleanup.trigger_rule == "all_done"
    assert set(WORK) <= cleanup.upstream_task_ids
    destroy = dag.get_task("cleanup_cluster")
    assert destroy.trigger_rule == "all_done" and "cleanup_kubernetes" in destroy.upstream_task_ids
    # a plain all_done cleanup as the only leaf would turn failed runs into successes
    truth = dag.get_task("run_succeeded")
    assert truth.trigger_rule == "none_failed" and set(WORK) <= truth.upstream_task_ids
    assert {t.task_id for t in dag.leaves} == {"cleanup_cluster", "run_succeeded"}
    # the sensor deletes the backend when its wait ends, cleanup in any run: no all_done here
    assert dag.get_task("stop_backend").trigger_rule == "all_success"
    assert dag.get_task("start_backend").trigger_rule == "none_failed"  # conversion may be skipped


def test_a_failed_wait_reaches_cleanup_in_one_scheduler_pass(dag):
    """Each step after the wait hangs on it directly, so all are marked upstream_failed at once."""
    after_wait = WORK[WORK.index("wait_for_rewards") + 1 :]
    assert all("wait_for_rewards" in dag.get_task(t).upstream_task_ids for t in after_wait)


def test_dag_settings_users_expect(dag):
    assert dag.catchup is False and dag.max_active_runs == 1
    assert dag.dagrun_timeout is not None and dag.doc_md and "gs://" in dag.doc_md
    assert set(dag.tags) >= {"tpu", "rl"} and dag.owner == "ml-platform"
    assert type(dag.timetable).__name__ == "NullTimetable"  # on demand unless configured


def test_schedule_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("TPU_RL_SCHEDULE", "0 3 * * 1")
    dag = DagBag(str(REPO / "dags")).dags[DAG_ID]
    assert dag.schedule == "0 3 * * 1"


def test_params_are_the_settings_with_titles_types_and_tutorial_defaults(dag):
    assert set(dag.params.keys()) == set(SETTING_FIELDS)
    for name in SETTING_FIELDS:
        param = dag.params.get_param(name)
        kind = param.schema["type"]  # [null, type]: a field that may be left empty
        assert (kind[-1] if isinstance(kind, list) else kind) in (
            "string",
            "integer",
            "number",
            "boolean",
            "array",
        )
        assert param.schema["title"] and param.description
    assert dag.params["topology"] == "4x8" and dag.params["num_batches"] == 50
    assert dag.params.get_param("cluster_mode").schema["enum"] == ["create", "existing"]
    assert not [k for k in dag.params if k.endswith("token")]  # the token is no Param


def test_jobs_use_gke_start_job_operator_and_wait_deferred(dag):
    for task_id in ("convert", "train", "export"):
        assert isinstance(dag.get_task(task_id), GKEStartJobOperator)
    assert dag.get_task("convert").deferrable and dag.get_task("export").deferrable
    assert dag.get_task("train").wait_until_job_complete is False
    assert dag.get_task("wait_for_rewards").deferrable


def _without_defaults(value):
    """Drop what the provider adds that the API server treats as unset or defaults anyway."""
    if isinstance(value, dict):
        return {
            k: _without_defaults(v)
            for k, v in value.items()
            if v not in ([], {}, None, False) and (k, v) != ("terminationMessagePolicy", "File")
        }
    if isinstance(value, list):
        return [_without_defaults(v) for v in value]
    return value


def _context(conf: dict) -> dict:
    ti = SimpleNamespace(dag_id=DAG_ID, task_id="t", run_id=RUN_ID, try_number=1, map_index=-1)
    return {"params": conf, "run_id": RUN_ID, "ti": ti, "dag": SimpleNamespace(dag_id=DAG_ID)}


@pytest.mark.parametrize(
    ("task_id", "plan_file"), [("convert", "convert.job.yaml"), ("train", "train.job.yaml")]
)
def test_operator_job_spec_equals_the_plan(
    dag, tutorial_conf, tmp_path, task_id, plan_file, monkeypatch
):
    """One code path: what `make plan` writes is what the operator submits (+ Airflow's labels)."""
    write_plan(RunLayout(load_settings(tutorial_conf), RUN_ID), tmp_path)
    planned = yaml.safe_load((tmp_path / plan_file).read_text())
    op = dag.get_task(task_id)
    monkeypatch.setattr(type(op), "prepare", RunJobOperator.prepare)  # no GCS look-up here
    op.configure(_context(tutorial_conf))
    monkeypatch.setattr(
        type(op),
        "hook",
        SimpleNamespace(get_namespace=lambda: None, is_in_cluster=False),
        raising=False,
    )
    submitted = ApiClient().sanitize_for_serialization(
        op.build_job_request_obj(_context(tutorial_conf))
    )
    assert submitted["metadata"]["name"] == planned["metadata"]["name"]
    assert submitted["metadata"]["namespace"] == planned["metadata"]["namespace"]
    assert planned["metadata"]["labels"].items() <= submitted["metadata"]["labels"].items()
    pod_planned, pod_submitted = planned["spec"].pop("template"), submitted["spec"].pop("template")
    assert submitted["spec"] == planned["spec"]
    planned_spec, submitted_spec = pod_planned["spec"], pod_submitted["spec"]
    assert _without_defaults(submitted_spec["containers"]) == planned_spec["containers"]
    for key in ("nodeSelector", "tolerations", "hostNetwork", "dnsPolicy", "restartPolicy"):
        assert _without_defaults(submitted_spec).get(key) == planned_spec.get(key), key
    assert pod_planned["metadata"]["labels"].items() <= pod_submitted["metadata"]["labels"].items()


def test_the_bucket_is_created_with_a_class_a_region_accepts(dag):
    """The operator defaults to MULTI_REGIONAL, which Cloud Storage refuses in a region."""
    ensure = dag.get_task("ensure_bucket")
    assert ensure.storage_class == "STANDARD"
    assert ensure.location == "{{ params.region }}"
