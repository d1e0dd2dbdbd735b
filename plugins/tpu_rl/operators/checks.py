"""The run's Python steps: validation, the reward gate, the export check and the run's verdict.

Plain operators rather than `@task`: importing `airflow.sdk.task` alone adds to every parse of
the DAG file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tpu_rl.dag.limits import CLEANUP, short_step
from tpu_rl.dag.links import CheckpointsLink, ExportLink
from tpu_rl.names import Step
from tpu_rl.operators.lineage import EmitsLineage
from tpu_rl.operators.run_step import RunStep

if TYPE_CHECKING:
    from airflow.sdk import Context

    from tpu_rl.layout import RunLayout

NAMES_SHOWN = 3  # tasks named in a verdict's list before "and N more"


def failure_verdict(final_task: str, states: dict[str, str | None]) -> str | None:
    """Why the run failed, the failed tasks first, the tasks they kept from running counted
    after (a failed `validate` leaves 14): None when `final_task` succeeded and nothing failed."""
    final = states.get(final_task)
    failed = sorted(t for t, s in states.items() if s == "failed")
    blocked = sorted(t for t, s in states.items() if s == "upstream_failed" and t != final_task)
    if not failed and not blocked and final == "success":
        return None
    parts = [f"{_some(failed)} failed"] if failed else []
    if final != "success":
        stopped = "" if failed or blocked else " (stopped before it ran: marked failed?)"
        parts.append(f"{final_task} is {final}{stopped}")
    if blocked:
        parts.append(f"not run (upstream_failed): {_some(blocked)}")
    return "the run did not succeed: " + "; ".join(parts)


def first_error(ti: Any, order: Sequence[str], states: dict[str, str | None]) -> str | None:
    """`validate: <the first line of its error>` for the first failed task in `order` (the
    DAG's) whose worker kept its error's first line (the XCom `failure`, written by
    tpu_rl.report.notify.RunFailureNotifier); None when no failed task kept one."""
    from tpu_rl.report.notify import FAILURE_XCOM_KEY

    for task_id in (t for t in order if states.get(t) == "failed"):
        reason = ti.xcom_pull(task_ids=task_id, key=FAILURE_XCOM_KEY)
        if isinstance(reason, str) and reason:
            return f"{task_id}: {reason}"
    return None


def _some(tasks: list[str]) -> str:
    shown = ", ".join(tasks[:NAMES_SHOWN])
    more = len(tasks) - NAMES_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


class ValidateRunOperator(RunStep):
    """The run's settings (Params + conf), checked against the DAG's dagrun_timeout; every
    problem in one failure. Returns the settings the other tasks use, with the deployment
    identity the run keeps to its end (tpu_rl.run_record)."""

    step_id = Step.VALIDATE
    step_doc = """
Checks the run's settings (the trigger form's fields and the run's conf) before anything costs
money, and lists every problem at once. With `cluster_mode=existing` it reads the cluster: a
missing one, or a GKE Autopilot one (the run needs GKE Standard), fails here. Returns the
settings the other tasks use, and this deployment's identity: every name and label the run gives
its objects carries it, even if the deployment's setting changes before the run ends.

**Failed?** Its log lists each invalid setting and why; trigger again with them fixed.
"""
    limit = short_step(1)

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow.providers.common.compat.sdk import AirflowFailException

        from tpu_rl.dag.run_checks import check_run
        from tpu_rl.deployment import DeploymentError
        from tpu_rl.report.estimate import estimate_run, estimate_table
        from tpu_rl.report.run_cost import NO_DURATIONS, reads_step_durations
        from tpu_rl.report.spend_limit import estimate_problem
        from tpu_rl.run_record import run_record
        from tpu_rl.settings.run_settings import SettingsError
        from tpu_rl.settings.validation import settings_warnings

        try:
            layout = self.run_layout(context)
        except (SettingsError, DeploymentError) as err:
            # Not chained: the task runner logs the exception with its traceback
            # (airflow/sdk/execution_time/task_runner.py, _run_task_and_map_outcome:
            # log.exception), and a chained one would show the list twice, in two tracebacks;
            # this way the list of problems ends the task's log.
            raise AirflowFailException(str(err)) from None
        for warning in settings_warnings(layout.settings):
            self.log.warning(warning)
        self.log.info("%s", estimate_table(estimate_run(layout.settings), "these settings"))
        if over := estimate_problem(layout.settings):  # max_spend_usd against the estimate
            raise AirflowFailException(over)
        if not reads_step_durations(context["ti"]):
            self.log.warning("The run report will have no step durations: %s", NO_DURATIONS)
        if "task_state_store" not in context:  # Airflow 3.3+ (rewards/sensor.py keeps it there)
            self.log.warning(
                "A retry of wait_for_rewards restarts its training_timeout_minutes: keeping the "
                "first try's deadline needs Airflow 3.3 or later (task_state_store); the run's "
                "work deadline still caps it"
            )
        return run_record(check_run(layout.settings, context["dag"]), layout.deployment)


class RewardGateOperator(RunStep):
    """Fails the run before export unless the checkpoint export will take (tpu_rl.rewards.
    checkpoint_choice) gained enough over the base model on each of `gate_metrics` (by default
    mean_reward by min_reward_gain). `rewards`: the reward sensor's result (templated: an
    XComArg is pulled). Returns the gate's figures (tpu_rl.promotion.gate) and, as `checkpoint`,
    the choice it judged."""

    step_id = Step.GATE
    step_doc = """
Chooses the checkpoint to export (`export_checkpoint`) and stops the run before export unless
its evaluation gained at least each of `gate_metrics` over the base model's (by default: the
post-training `mean_reward` is at least the pre-training one plus `min_reward_gain`). Accuracy
and format accuracy are reported apart, gated or not. With held-out evaluation
(`heldout_tasks`), the step to export is the one it scored best, and the run stops when that
step answers the held-out items significantly worse than the base model (its paired verdict).
A stop is a failure on purpose: the run is marked failed and the notification says why, with
the numbers.
"""
    limit = short_step(1)
    operator_extra_links = (CheckpointsLink(),)

    template_fields: Sequence[str] = ("rewards",)

    def __init__(self, *, rewards: Any = None, **kwargs: Any) -> None:
        # evaluate_heldout skips when held-out evaluation is off: gate anyway
        kwargs.setdefault("trigger_rule", "none_failed")
        super().__init__(**kwargs)
        self.rewards = rewards

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow.providers.common.compat.sdk import AirflowFailException

        from tpu_rl import deployment
        from tpu_rl.checkpoints.checkpoint_choice import choose_for_run
        from tpu_rl.promotion.exported import heldout_result
        from tpu_rl.promotion.gate import candidate, heldout_choice, heldout_gate, reward_gate
        from tpu_rl.run_summary import write_summary

        layout = self.run_layout(context)
        s = layout.settings
        report = heldout_result(context["ti"], s)
        try:
            choice = choose_for_run(
                layout.checkpoints_dir,
                deployment.gcp_conn_id(),
                self.rewards,
                s.export_checkpoint,
                s.best_metric,
                heldout_choice(report) if report else None,
            )
        except ValueError as err:
            raise AirflowFailException(f"{err}: nothing to export") from None
        self.log.info("Checkpoint to export: step %d, %s.", choice.step, choice.reason)
        post = (self.rewards or {}).get("post")
        judged = candidate(choice.step, choice.metrics, post)
        if choice.metrics is None:
            self.log.warning(
                "Step %d has no evaluation of its own: judging %s.",
                choice.step,
                judged[0] if judged else "the Post line",
            )
        gate = reward_gate(self.rewards, s.min_reward_gain, s.gate_metrics, judged)
        result = {**gate, "checkpoint": choice.as_dict()}
        if report is not None:
            result["heldout"] = heldout_gate(report)
            for line in result["heldout"]["reasons"]:
                self.log.info("Held-out: %s", line)
        write_summary(context["ti"], self.task_id, gate=result)
        return result


class VerifyExportOperator(RunStep):
    """Checks the exported files and emits the export's URI as an event of every outlet Asset
    (`outcome` writes the run report beside them, once the run's cost is known)."""

    step_id = Step.VERIFY
    step_doc = """
Checks the exported files and emits the `tpu_rl_exported_model` asset event (which can trigger
downstream DAGs). It only reads the bucket, so the cleanups do not wait for it: the TPUs go the
moment export ends. `outcome` writes `run-report.json` and `run-report.md` next to the files.
"""
    limit = short_step(2)
    operator_extra_links = (ExportLink(),)

    def execute(self, context: Context) -> str:
        from airflow.providers.common.compat.sdk import AirflowFailException

        from tpu_rl import deployment
        from tpu_rl.run_summary import write_summary
        from tpu_rl.storage import missing_export_files

        layout = self.run_layout(context)
        missing = missing_export_files(layout.export_dir, deployment.gcp_conn_id())
        if missing:
            raise AirflowFailException(f"export {layout.export_dir} lacks {', '.join(missing)}")
        uri = layout.export_dir
        for asset in self.outlets:
            context["outlet_events"][asset].extra = {"uri": uri, "run_id": context["run_id"]}
        write_summary(context["ti"], self.task_id, export_uri=uri)
        return uri


class RunOutcomeOperator(EmitsLineage):
    """The run's verdict, as a teardown: fails, naming them, unless `final_task` succeeded and
    no watched task (by default: every other task of the DAG) failed.

    Why a task: after "mark failed" (the UI or REST) Airflow 3.3 fails the running task, skips
    the pending ones and lets the teardowns finish; the run's state is then computed from its
    leaves, and skipped leaves count as success. This teardown (on_failure_fail_dagrun) is the
    one leaf, so a run stopped half-way, a failed step, or an incomplete cleanup all end the run
    failed.
    """

    step_id = Step.OUTCOME
    step_doc = """
The run's verdict, a teardown and the DAG's one leaf: fails, naming them, unless `verify`
succeeded and no step or cleanup failed. So a marked-failed, stopped or half-cleaned run ends
failed, and a successful cleanup never hides a failed step. Before the verdict it counts the
run's TPU cost once (its XCom `tpu_cost`: what the report and the RL page show), writes
`run-report.json` and `run-report.md` next to a verified export, and puts the verdict, the
rewards and the cost in the run's note (through the deployment's Airflow API connection); with
held-out evaluation, both show its table per benchmark (the note a shorter form when it must).
"""
    limit = short_step(1, CLEANUP)
    run_cost: dict[str, Any] | None = None  # the run's TPU cost, once counted

    def __init__(
        self, *, final_task: str, watched: Sequence[str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.final_task = final_task
        self.watched = list(watched) if watched is not None else None

    def lineage_facets(self, layout: RunLayout) -> dict[str, dict[str, Any]]:
        """The run's TPUs, images and cost, as counted for the report (no dataset: the run's
        verdict reads and writes no model)."""
        if self.run_cost is None:
            return {}
        return self.tpu_facets(layout, cost=self.run_cost)

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow.providers.common.compat.sdk import AirflowFailException

        from tpu_rl.promotion.approval_text import run_promotion
        from tpu_rl.promotion.exported import champion_comparison

        run_id, final_task = context["run_id"], self.final_task
        watched = self.watched
        if watched is None:
            watched = [task for task in context["dag"].task_ids if task != self.task_id]
        states = (
            context["ti"]
            .get_task_states(dag_id=context["dag"].dag_id, task_ids=list(watched), run_ids=[run_id])
            .get(run_id, {})
        )
        verdict = failure_verdict(final_task, states)
        if verdict and (first := first_error(context["ti"], watched, states)):
            verdict = f"{first} ({verdict.removeprefix('the run did not succeed: ')})"
        verified = states.get(final_task) == "success"
        promotion = champion = None  # promoted or why not; the champion comparison's verdict
        try:
            champion = (champion_comparison(context["ti"]) or {}).get("reason")
            promotion = run_promotion(context["ti"]) if verified else None
            self.report_results(context, verdict, promotion, verified=verified)
        except Exception:  # the verdict stands whatever the reporting met (GCS, the API)
            self.log.exception("The run's cost, report or note could not be completed")
        if verdict:
            raise AirflowFailException(verdict)
        self.log.info("%s succeeded and every cleanup did its part.", final_task)
        self.log.info("Promotion: %s", promotion or "none (no verified export)")
        return {"final_task": final_task, "states": states, "champion": champion}

    def report_results(
        self, context: Context, failure: str | None, promotion: str | None, *, verified: bool
    ) -> None:
        """Count the run's cost once (XCom `tpu_cost`), write the report beside a verified
        export, set the run's note (with `promotion`: promoted, or why not); both with the
        held-out benchmarks when the run evaluated them. A run whose settings never validated
        has no cost."""
        from tpu_rl import deployment
        from tpu_rl.promotion.exported import heldout_result
        from tpu_rl.report.run_cost import COST_KEY, count_run_cost
        from tpu_rl.report.run_note import note_text, set_run_note
        from tpu_rl.report.run_report import publish_run_report
        from tpu_rl.run_summary import write_summary
        from tpu_rl.settings.run_settings import SettingsError

        ti = context["ti"]
        try:
            layout = self.run_layout(context)
        except SettingsError as err:
            self.log.info("No TPU cost: the run's settings are not known (%s).", err)
            tpu, report, heldout = None, None, None
        else:
            tpu = count_run_cost(layout, context)
            self.run_cost = tpu
            ti.xcom_push(key=COST_KEY, value=tpu)
            write_summary(ti, self.task_id, cost=tpu)
            heldout = heldout_result(ti, layout.settings)
            report = publish_run_report(layout, context, tpu, heldout) if verified else None
        verdict = f"failed: {failure}" if failure else "succeeded: model exported and verified"
        rewards = ti.xcom_pull(task_ids=Step.WAIT_FOR_REWARDS)
        rewards = rewards if isinstance(rewards, dict) else None
        text = note_text(verdict, rewards, tpu, report, promotion, ti.run_id, heldout)
        set_run_note(deployment.airflow_api_conn_id(), ti.dag_id, ti.run_id, text)
