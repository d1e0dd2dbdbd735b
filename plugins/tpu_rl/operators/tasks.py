"""The DAG's small Python steps (RunStepOperator): validation, the reward gate, the export
check and the run's verdict."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from tpu_rl import deployment
from tpu_rl.dag.run_limits import budget_problem
from tpu_rl.dag.runtime import layout_from_context
from tpu_rl.report.run_report import publish_run_report
from tpu_rl.settings.run_settings import SettingsError, load_settings
from tpu_rl.storage import missing_export_files


def validate(op: Any, context: Any) -> dict[str, Any]:
    """The run's settings (Params + conf), checked against the DAG's dagrun_timeout."""
    timeout = context["dag"].dagrun_timeout
    return validate_settings(context["params"], timeout.total_seconds() / 60)


def validate_settings(params: dict[str, Any], dagrun_timeout_minutes: float) -> dict[str, Any]:
    """The run's settings, checked; every problem in one failure, before any cloud call.

    Also that the run's time limits fit the DAG's dagrun_timeout, and that the deployment's
    connections are of the right type.
    """
    try:
        settings = load_settings(dict(params))
    except SettingsError as err:
        raise AirflowFailException(str(err)) from err
    problems = []
    if problem := budget_problem(settings, dagrun_timeout_minutes):
        problems.append(problem)
    for check in (deployment.check_gcp_connection, deployment.hf_token):
        try:
            check()
        except deployment.DeploymentError as err:
            problems.append(str(err))
    if problems:
        raise AirflowFailException(str(SettingsError(problems)))
    return settings.to_dict()


def gate(op: Any, context: Any, rewards: dict[str, Any]) -> dict[str, float]:
    """The reward gate with the run's min_reward_gain."""
    return reward_gate(rewards, float(context["params"]["min_reward_gain"]))


def reward_gate(rewards: dict[str, Any], min_gain: float) -> dict[str, float]:
    """Stop before export unless post mean_reward >= pre mean_reward + min_gain."""
    if not rewards or not rewards.get("post"):
        raise AirflowFailException("no post-training metrics: the reward sensor gave none")
    post = _mean_reward(rewards["post"], "post")
    pre_metrics = rewards.get("pre")
    if pre_metrics is None:
        raise AirflowFailException(
            f"post-training mean_reward={post:.4f} but no pre-training line to compare with "
            "(num_test_batches=0?)"
        )
    pre = _mean_reward(pre_metrics, "pre")
    if post < pre + min_gain:
        raise AirflowFailException(
            f"reward gate: post-training mean_reward={post:.4f} is below pre-training "
            f"mean_reward={pre:.4f} + min_reward_gain={min_gain:g}; not exporting"
        )
    return {"pre_mean_reward": pre, "post_mean_reward": post, "gain": post - pre}


def _mean_reward(metrics: Any, which: str) -> float:
    """The line's finite mean_reward, else a failure saying what the line held instead."""
    value = metrics.get("mean_reward") if isinstance(metrics, dict) else None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise AirflowFailException(
            f"reward gate: the {which}-training line has no usable mean_reward (got {value!r}; "
            "a MaxText build without reward logging, or a NaN reward); not exporting"
        )
    return number


def verify_export(context: Any) -> str:
    """The exported model's URI, after checking its files exist and writing the run report.

    Airflow 3.3's Task SDK cannot set the run's note, so the report's summary goes to the log.
    """
    layout = layout_from_context(context)
    missing = missing_export_files(layout.export_dir, deployment.gcp_conn_id())
    if missing:
        raise AirflowFailException(f"export {layout.export_dir} lacks {', '.join(missing)}")
    publish_run_report(layout, context)
    return layout.export_dir


def verify(op: Any, context: Any) -> str:
    """verify_export, and the export's URI as an event of every outlet Asset of the task."""
    uri = verify_export(context)
    for asset in op.outlets:
        context["outlet_events"][asset].extra = {"uri": uri, "run_id": context["run_id"]}
    return uri


FAILED = ("failed", "upstream_failed")


def outcome(
    op: Any, context: Any, final_task: str, watched: Sequence[str] | None = None
) -> dict[str, Any]:
    """The run's verdict: fails, naming them, unless `final_task` succeeded and no watched task
    (by default: every other task of the DAG) failed.

    Why a task: after "mark failed" (the UI or REST) Airflow 3.3 fails the running task, skips
    the pending ones and lets the teardowns finish; the run's state is then computed from its
    leaves, and skipped leaves count as success. This teardown (on_failure_fail_dagrun) is the
    one leaf, so a run stopped half-way, a failed step, or an incomplete cleanup all end the run
    failed.
    """
    run_id = context["run_id"]
    if watched is None:
        watched = [task for task in context["dag"].task_ids if task != op.task_id]
    states = (
        context["ti"]
        .get_task_states(dag_id=context["dag"].dag_id, task_ids=list(watched), run_ids=[run_id])
        .get(run_id, {})
    )
    failed = {task: state for task, state in states.items() if state in FAILED}
    final = states.get(final_task)
    if failed or final != "success":
        listed = ", ".join(f"{task} {state}" for task, state in sorted(failed.items()))
        raise AirflowFailException(
            f"the run did not succeed: {final_task} is {final}"
            + (f"; {listed}" if listed else " (stopped before it ran: marked failed?)")
        )
    op.log.info("%s succeeded and every cleanup did its part.", final_task)
    return {"final_task": final_task, "states": states}


STEPS: dict[str, Callable[..., Any]] = {
    "validate": validate,
    "gate": gate,
    "verify": verify,
    "outcome": outcome,
}
