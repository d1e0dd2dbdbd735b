"""The DAG as Airflow loads it: graph, trigger rules, Params, and the Jobs it would submit."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
import yaml
from airflow.providers.common.compat.sdk import AirflowFailException
from airflow.providers.google.cloud.operators.kubernetes_engine import GKEStartJobOperator
from airflow.sdk import BaseOperator
from kubernetes.client import ApiClient

from sandbox.dagbags import DagBag
from tests.conftest import PIPELINE, REPO
from tests.run_steps import LIMITS
from tpu_rl import storage
from tpu_rl.dag.run_limits import apply_run_limits, cleanup_reserve_minutes, dag_limits
from tpu_rl.layout import RunLayout
from tpu_rl.names import DAG_ID, JANITOR_DAG_ID
from tpu_rl.operators.job_steps import ConvertCheckpointOperator
from tpu_rl.plan import write_plan
from tpu_rl.report.notify import RunFailureNotifier
from tpu_rl.settings.run_settings import SETTING_FIELDS, load_settings

RUN_ID = "manual__2026-11-29T10:00:00+00:00"
TEARDOWNS = ["cleanup_kubernetes", "cleanup_cluster", "outcome"]


@pytest.fixture(scope="module")
def dag():
    bag = DagBag(str(REPO / "dags"))
    assert bag.import_errors == {}
    return bag.dags[DAG_ID]


def test_work_runs_in_the_tutorials_order(dag):
    for before, after in itertools.pairwise(PIPELINE):
        assert before in dag.get_task(after).upstream_task_ids, (before, after)
    assert dag.get_task("evaluate_champion").upstream_task_ids == {"wait_for_rewards"}
    assert dag.get_task("stop_backend").upstream_task_ids == {"evaluate_champion"}
    assert dag.get_task("compare_champion").upstream_task_ids == {"verify", "evaluate_champion"}


def test_cleanups_are_teardowns_whose_setups_precede_the_spending(dag):
    """A teardown runs when one of its setups succeeded: ensure_bucket (the terraform state)
    precedes the cluster, so a cluster that failed half-way is still destroyed."""
    k8s, cluster = dag.get_task("cleanup_kubernetes"), dag.get_task("cleanup_cluster")
    assert k8s.is_teardown and cluster.is_teardown
    assert k8s.trigger_rule == cluster.trigger_rule == "all_done_setup_success"
    setups = {t.task_id for t in dag.tasks if t.is_setup}
    assert setups == {"ensure_bucket", "create_cluster", "hf_token_secret"}
    assert {t.task_id for t in k8s.upstream_list if t.is_setup} == {
        "create_cluster",
        "hf_token_secret",
    }
    assert {t.task_id for t in cluster.upstream_list if t.is_setup} == {
        "ensure_bucket",
        "create_cluster",
    }
    # the Kubernetes objects go first; then the cluster; then the verdict (after promote)
    assert "cleanup_kubernetes" in cluster.upstream_task_ids
    assert dag.get_task("outcome").upstream_task_ids == {"cleanup_cluster", "promote"}


def test_the_tpus_go_as_soon_as_export_ends_not_after_the_files_are_checked(dag):
    """verify only reads the bucket: the cleanups do not wait for it (the TPU nodes of a
    flex-start or Spot pool bill until the cluster is destroyed). The held-out evaluation's Job
    is over before export starts (gate waits for it)."""
    assert dag.get_task("cleanup_kubernetes").upstream_task_ids == {
        "create_cluster",
        "hf_token_secret",
        "export",
        "stop_backend",
    }
    assert "verify" not in dag.get_task("cleanup_kubernetes").get_flat_relative_ids(upstream=True)


def test_a_failed_wait_fails_export_in_the_same_scheduler_pass(dag):
    """cleanup starts on the pass after the wait failed: export hangs on the wait directly."""
    assert "wait_for_rewards" in dag.get_task("export").upstream_task_ids


def test_a_cleared_export_waits_for_its_setups_to_run_again(dag):
    """Clearing export clears the setups of the teardowns after it (the cluster the cleared run
    destroyed is deployed again); the scheduler looks at direct upstreams only, so export hangs
    on the last setup directly or it races the redeploy and fails a try."""
    assert dag.get_task("export").upstream_task_ids == {
        "gate",
        "wait_for_rewards",
        "hf_token_secret",
    }
    assert "create_cluster" in dag.get_task("hf_token_secret").upstream_task_ids


def test_the_graph_has_no_fan_in_and_the_verdict_is_the_only_leaf(dag):
    """No run_succeeded, no edge from every work task: about 30 edges, not 40 (the held-out
    evaluation adds three: after the wait and stop_backend, before the gate)."""
    assert "run_succeeded" not in dag.task_ids
    edges = sum(len(t.downstream_task_ids) for t in dag.tasks)
    assert edges <= 32, edges
    assert max(len(t.upstream_task_ids) for t in dag.tasks) <= 4
    outcome = dag.get_task("outcome")
    assert outcome.is_teardown and outcome.on_failure_fail_dagrun
    assert [t.task_id for t in dag.leaves] == ["outcome"]
    asked = []

    def get_task_states(dag_id, task_ids, run_ids):
        asked.extend(task_ids)
        return {run_ids[0]: {t: "success" for t in task_ids}}

    context = {"ti": SimpleNamespace(get_task_states=get_task_states), "dag": dag, "run_id": "r"}
    outcome.execute(context)
    assert set(asked) == set(dag.task_ids) - {"outcome"}
    assert {*PIPELINE, "stop_backend", "cleanup_kubernetes", "cleanup_cluster"} <= set(asked)


def test_approval_follows_the_cleanups_and_promotion_follows_approval(dag):
    """A person may answer hours later: the TPUs and the cluster are gone by then."""
    approve, promote = dag.get_task("approve"), dag.get_task("promote")
    assert approve.upstream_task_ids == {"cleanup_cluster", "compare_champion"}
    assert promote.upstream_task_ids == {"approve"}
    assert "promote" in dag.get_task("outcome").upstream_task_ids
    assert [a.name for a in promote.outlets] == ["tpu_rl_champion_model"]


def test_the_sensor_releases_the_backend_and_stop_backend_does_not_block_the_export(dag):
    """stop_backend goes before the held-out evaluation (its Job needs the backend's chips),
    which goes whatever stop_backend's end: skipped when off, it keeps nothing from export."""
    assert dag.get_task("stop_backend").downstream_task_ids == {
        "cleanup_kubernetes",
        "evaluate_heldout",
    }
    assert dag.get_task("evaluate_heldout").trigger_rule == "all_done"
    assert dag.get_task("gate").trigger_rule == "none_failed"
    assert dag.get_task("start_backend").trigger_rule == "none_failed"  # conversion may be skipped


def test_every_task_has_a_finite_limit_from_the_limits_table(dag):
    for task in dag.tasks:
        assert task.execution_timeout is not None and task.execution_timeout.total_seconds() > 0
        assert task.retries == LIMITS[task.task_id].retries, task.task_id
    assert set(LIMITS) == set(dag.task_ids)


def test_dag_settings_users_expect(dag):
    assert dag.catchup is False and dag.max_active_runs == 1
    assert dag.dagrun_timeout == timedelta(hours=72) and dag.doc_md and "gs://" in dag.doc_md
    assert dag.on_failure_callback
    # a failed task tells the deployer's channels; the verdict only when no other task did
    for task in dag.tasks:
        [notifier] = task.on_failure_callback
        assert isinstance(notifier, RunFailureNotifier), task.task_id
        assert notifier.only_when_untold == (task.task_id == "outcome"), task.task_id
    assert set(dag.tags) >= {"tpu", "rl"} and dag.owner == "ml-platform"
    assert type(dag.timetable).__name__ == "NullTimetable"  # on demand unless configured


def test_schedule_timeout_and_connections_come_from_the_deployment(monkeypatch):
    monkeypatch.setenv("TPU_RL_SCHEDULE", "0 3 * * 1")
    monkeypatch.setenv("TPU_RL_DAGRUN_TIMEOUT_MINUTES", "1.5")
    monkeypatch.setenv("TPU_RL_GCP_CONN_ID", "gcp_rl")
    dag = DagBag(str(REPO / "dags")).dags[DAG_ID]
    assert dag.schedule == "0 3 * * 1"
    assert dag.dagrun_timeout == timedelta(seconds=90)
    for task_id in (
        "ensure_bucket",
        "create_cluster",
        "hf_token_secret",
        "train",
        "cleanup_kubernetes",
    ):
        assert dag.get_task(task_id).gcp_conn_id == "gcp_rl", task_id
    assert not {"gcp_conn_id", "hf_conn_id"} & set(dag.params.keys())


@pytest.mark.parametrize("raw", ["inf", "nan", "-1", "1e400", "10**400", "9" * 5000])
def test_a_bad_timeout_is_an_import_error_naming_the_variable(monkeypatch, raw):
    """Not an OverflowError: the DAG file's import fails with the variable's name and its rule,
    and the janitor's DAG file still loads."""
    monkeypatch.setenv("TPU_RL_DAGRUN_TIMEOUT_MINUTES", raw)
    bag = DagBag(str(REPO / "dags"))
    [(path, error)] = bag.import_errors.items()
    assert path.endswith("tpu_rl_post_training.py")
    assert "TPU_RL_DAGRUN_TIMEOUT_MINUTES: must be a positive number" in error
    assert "OverflowError" not in error and JANITOR_DAG_ID in bag.dags


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
            "object",
        )
        assert param.schema["title"] and (param.description or param.schema["description_md"])
    assert dag.params["num_batches"] == 50
    # a setting the catalogue's cell gives starts empty, the run's cell filling it
    topology = dag.params.get_param("topology")
    assert topology.value is None and "(the tutorial's: 4x8)" in topology.description
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


# What validate recorded of the run's deployment identity, as later tasks read it.
VALIDATE_RECORD = {"deployment_id": "test-deployment"}


def _context(conf: dict) -> dict:
    ti = SimpleNamespace(
        dag_id=DAG_ID,
        task_id="t",
        run_id=RUN_ID,
        try_number=1,
        map_index=-1,
        xcom_pull=lambda task_ids: VALIDATE_RECORD if task_ids == "validate" else None,
    )
    return {"params": conf, "run_id": RUN_ID, "ti": ti, "dag": SimpleNamespace(dag_id=DAG_ID)}


@pytest.mark.parametrize(
    ("task_id", "plan_file"), [("convert", "convert.job.yaml"), ("train", "train.job.yaml")]
)
def test_operator_job_spec_equals_the_plan(
    dag, tutorial_conf, tmp_path, task_id, plan_file, monkeypatch
):
    """One code path: what `make plan` writes is what the operator submits (+ Airflow's labels)."""
    write_plan(RunLayout(load_settings(tutorial_conf), RUN_ID, "test-deployment"), tmp_path)
    planned = yaml.safe_load((tmp_path / plan_file).read_text())
    op = dag.get_task(task_id)
    monkeypatch.setattr(storage, "object_exists", lambda uri, conn: False)  # no GCS look-up here
    monkeypatch.setattr(ConvertCheckpointOperator, "hold_folder", lambda self, layout, ctx: None)
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


class TryXComs:
    """The XComs of one task try (`ti`'s push and pull); a new try starts without any."""

    def __init__(self, task_id: str) -> None:
        self.task_id, self.pushed = task_id, {}

    def xcom_push(self, key: str, value) -> None:
        self.pushed[key] = value

    def xcom_pull(self, task_ids: str, key: str = "return_value"):
        if task_ids == "validate" != self.task_id:  # the run's record (tpu_rl.run_record)
            return VALIDATE_RECORD
        assert task_ids == self.task_id
        return self.pushed.get(key)


def _run_context(dag, task, conf: dict, started_ago: timedelta = timedelta(0)) -> dict:
    start = datetime.now(UTC) - started_ago
    return {
        "task": task,
        "params": conf,
        "dag": dag,
        "dag_run": SimpleNamespace(start_date=start),
        "run_id": RUN_ID,
        "ti": TryXComs(task.task_id),
    }


def test_a_conf_with_raised_limits_raises_them_at_run_time(tutorial_conf, monkeypatch):
    """execution_timeout is parsed from the defaults; the run's settings replace it, and the
    Job's deadline and the deferral's timeout follow the same numbers."""
    dag = DagBag(str(REPO / "dags")).dags[DAG_ID]  # a fresh parse: tasks get changed here
    conf = {**tutorial_conf, "conversion_timeout_minutes": 400, "cluster_timeout_minutes": 150}
    convert = dag.get_task("convert")
    assert convert.execution_timeout == timedelta(minutes=60 + 180)  # the defaults, at parse
    apply_run_limits(_run_context(dag, convert, conf))
    assert convert.execution_timeout == timedelta(minutes=60 + 400)
    monkeypatch.setattr(storage, "object_exists", lambda uri, conn: False)
    monkeypatch.setattr(ConvertCheckpointOperator, "hold_folder", lambda self, layout, ctx: None)
    convert.configure(_context(conf))
    assert convert.full_job_spec.spec.active_deadline_seconds == (60 + 400) * 60  # wait, step
    seen = {}
    monkeypatch.setattr(BaseOperator, "defer", lambda self, **kw: seen.update(kw))
    convert.defer(trigger=object(), method_name="execute_complete")
    assert timedelta(minutes=459) < seen["timeout"] <= timedelta(minutes=460)

    for task_id in ("create_cluster", "cleanup_cluster"):
        task = dag.get_task(task_id)
        apply_run_limits(_run_context(dag, task, conf))
        assert task.execution_timeout == timedelta(minutes=150), task_id

    wait = dag.get_task("wait_for_rewards")
    apply_run_limits(_run_context(dag, wait, {**conf, "training_timeout_minutes": 900}))
    assert wait.execution_timeout == timedelta(minutes=900)


def test_every_task_applies_the_runs_limits_before_execute(tutorial_conf, monkeypatch):
    """Each operator's pre_execute (what the task runner calls before execute and before each
    resume) sets the limit from the run's settings, not the parse-time default."""
    monkeypatch.setenv("TPU_RL_DEPLOYMENT_ID", "test-deployment")  # validate reads it
    dag = DagBag(str(REPO / "dags")).dags[DAG_ID]  # a fresh parse: tasks get changed here
    raised = {
        "pending_timeout_minutes": 70,
        "cluster_timeout_minutes": 100,
        "conversion_timeout_minutes": 190,
        "training_timeout_minutes": 730,
        "export_timeout_minutes": 200,
    }
    settings = load_settings({**tutorial_conf, **raised})
    assert not dag.default_args.get("pre_execute")
    for task in dag.tasks:
        assert type(task).pre_execute is not BaseOperator.pre_execute, task.task_id
        task.execution_timeout = timedelta(seconds=1)
        task.pre_execute(_run_context(dag, task, {**tutorial_conf, **raised}))
        expected = timedelta(minutes=LIMITS[task.task_id].minutes(settings))
        assert task.execution_timeout == expected, task.task_id


def test_the_work_stops_in_time_for_the_cleanup_before_dagrun_timeout(tutorial_conf):
    dag = DagBag(str(REPO / "dags")).dags[DAG_ID]
    reserve = cleanup_reserve_minutes(load_settings(tutorial_conf), dag_limits(dag.tasks))
    wait = dag.get_task("wait_for_rewards")
    left = timedelta(minutes=5)
    started = dag.dagrun_timeout - timedelta(minutes=reserve) - left
    apply_run_limits(_run_context(dag, wait, tutorial_conf, started_ago=started))
    assert left - timedelta(seconds=5) < wait.execution_timeout <= left
    with pytest.raises(AirflowFailException, match="the run's time is up"):
        apply_run_limits(_run_context(dag, wait, tutorial_conf, started_ago=started + left))
    cleanup = dag.get_task("cleanup_cluster")  # a teardown keeps its whole limit
    apply_run_limits(_run_context(dag, cleanup, tutorial_conf, started_ago=started + left))
    assert cleanup.execution_timeout == timedelta(minutes=90)


def test_the_budget_reads_each_tasks_retries_and_retry_delay(dag, tutorial_conf):
    """The scheduler holds a failed try for the task's retry_delay before its retry: the budget
    counts that wait for each retry the task has."""
    settings = load_settings(tutorial_conf)
    budgets = dag_limits(dag.tasks)
    assert set(budgets) == {task.task_id for task in dag.tasks}
    for task in dag.tasks:
        budget, limit = budgets[task.task_id], LIMITS[task.task_id]
        assert budget.tries == task.retries + 1 == limit.tries, task.task_id
        wait = task.retries * task.retry_delay.total_seconds() / 60
        assert budget.retry_wait_minutes == pytest.approx(wait), task.task_id
        runs = 1 if limit.total else limit.tries
        assert budget.minutes(settings) == pytest.approx(limit.minutes(settings) * runs + wait)


def test_a_wait_that_ended_in_time_is_not_lost_to_the_deadline(tutorial_conf):
    """The resume after a deferral (the rewards arrived) is not capped: its result counts."""
    dag = DagBag(str(REPO / "dags")).dags[DAG_ID]
    wait = dag.get_task("wait_for_rewards")
    started = dag.dagrun_timeout - timedelta(
        minutes=cleanup_reserve_minutes(load_settings(tutorial_conf), dag_limits(dag.tasks)) + 5
    )
    context = _run_context(dag, wait, tutorial_conf, started_ago=started)
    apply_run_limits(context)  # the try's start, 5 minutes before the work deadline: it defers
    assert wait.execution_timeout <= timedelta(minutes=5)
    context["dag_run"] = SimpleNamespace(start_date=datetime.now(UTC) - dag.dagrun_timeout)
    apply_run_limits(context)  # the same try resumed (its XComs kept), past the deadline
    assert wait.execution_timeout == timedelta(minutes=720)
    with pytest.raises(AirflowFailException, match="the run's time is up"):  # a new try
        apply_run_limits({**context, "ti": TryXComs("wait_for_rewards")})


def test_the_bucket_is_created_with_a_class_a_region_accepts(dag):
    """The operator defaults to MULTI_REGIONAL, which Cloud Storage refuses in a region."""
    ensure = dag.get_task("ensure_bucket")
    assert ensure.storage_class == "STANDARD"
    assert ensure.location == "{{ params.region }}"


@pytest.mark.parametrize("store", [None, {}], ids=["airflow-3.1-3.2", "airflow-3.3"])
def test_validate_says_in_one_line_what_this_airflow_cannot_keep(
    dag, tutorial_conf, monkeypatch, capfd, store
):
    """Below Airflow 3.3 there is no task_state_store: the wait's first deadline is not kept
    across its retries, and validate says so instead of letting it pass silently."""
    import tpu_rl.dag.run_checks

    monkeypatch.setattr(tpu_rl.dag.run_checks, "check_run", lambda settings, dag: {})
    monkeypatch.setenv("TPU_RL_DEPLOYMENT_ID", "test-deployment")
    validate = dag.get_task("validate")
    context = _run_context(dag, validate, tutorial_conf)
    if store is not None:
        context["task_state_store"] = store
    validate.execute(context)
    warned = "keeping the first try's deadline needs Airflow 3.3" in capfd.readouterr().out
    assert warned is (store is None)
