"""The run's last two steps: a person's approval (optional) and the promotion of the verified
export to the deployment's champion."""

from __future__ import annotations

import inspect
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.standard.operators.hitl import ApprovalOperator, HITLOperator

from tpu_rl.dag.limits import STEP_MINUTES, Limit, short_step
from tpu_rl.dag.links import ExportLink
from tpu_rl.names import Step
from tpu_rl.operators.lineage import EmitsLineage
from tpu_rl.operators.run_step import RunStep
from tpu_rl.promotion.approval_notice import ApprovalRequestNotifier

if TYPE_CHECKING:
    from airflow.sdk import Context

    from tpu_rl.heldout.hold import Hold
    from tpu_rl.heldout.report import HeldoutReport
    from tpu_rl.layout import RunLayout
    from tpu_rl.lineage.graph import StepLineage
    from tpu_rl.promotion.approval_text import ApprovalCase
    from tpu_rl.settings.fields import RunSettings


def takes_response_timeout(operator: type[HITLOperator]) -> bool:
    """Whether the provider's HITL operator takes `response_timeout`: from
    apache-airflow-providers-standard 1.12.2 (operators/hitl.py HITLOperator.__init__); before it
    BaseOperator refuses the argument (TypeError at parse) and the wait for an answer is the
    task's `execution_timeout` (HITLOperator.execute), which RunStep sets from the same limit."""
    return "response_timeout" in inspect.signature(operator.__init__).parameters


RESPONSE_TIMEOUT = takes_response_timeout(HITLOperator)  # read once, at import


def _approval_minutes(s: RunSettings) -> float:
    return s.approval_timeout_minutes if s.approval == "required" else STEP_MINUTES


def held_wait(context: Context, s: RunSettings) -> timedelta:
    """How long a held approval of a run without `approval=required` waits: its
    approval_timeout_minutes, or less when the run's time limit has less left (its work
    deadline: dagrun_timeout less the teardowns' reserve). Such a wait is in no step's limit,
    so a held run still ends within its dagrun_timeout."""
    from tpu_rl.dag.run_limits import work_deadline

    wait = timedelta(minutes=s.approval_timeout_minutes)
    if (deadline := work_deadline(context, s)) is None:
        return wait
    return max(timedelta(seconds=1), min(wait, timedelta(seconds=deadline - time.time())))


class ApproveExportOperator(RunStep, ApprovalOperator):
    """Airflow's ApprovalOperator with the run's comparison as its body (the base model, the
    champion and this export side by side, the gate's and the comparison's verdicts, the TPU
    cost so far), when the run's `approval` is `required`; otherwise it passes at once (returns
    {"approval": "none"}) unless the training's curves or the held-out evaluation hold it for a
    person (tpu_rl.heldout.hold). Its notifier puts the link to the decision in the run's note.

    Passing rather than skipping: a skipped `approve` would skip `promote` too, and skipped then
    means one thing only: not promoted (the champion won, or a person said no). A reject, or no
    answer within `approval_timeout_minutes` when `approval_timeout_answer` is reject (the
    defaults answer then: the scheduler's AWAITING_INPUT sweep, or HITLTrigger before Airflow
    3.3), skips `promote`; the run does not fail: it did its work, and a person's no is an
    outcome, not an error (the provider's own warning against `fail_on_reject`,
    operators/hitl.py ApprovalOperator.__init__).
    """

    step_id = Step.APPROVE
    step_doc = """
With `approval=required`, asks for a person's approval of the verified export in Airflow's
**Required Actions**, once the TPUs and the cluster are gone. The run's note links the decision
(*Approve or reject*) while it waits, and the deployment's notification channels get the same
link. Its text puts the base model, the champion and this export side by side, with the gate's
and the champion comparison's verdicts and the TPU cost so far. **Approve** promotes the export;
**Reject** leaves it where it is, unpromoted, and the run still succeeds (its note says so). No
answer within `approval_timeout_minutes` answers `approval_timeout_answer` (by default reject;
the form highlights that option). With `approval=none` it passes at once, unless the training
shows reward hacking: the batch reward rose while the completion length moved past
`hold_length_drift` times its start, or the held-out evaluation has the export answer a guard
benchmark, or (while the batch reward rose) a scored one, significantly worse than the base
model. Then it asks a person, with that evidence on the page, and waits
`approval_timeout_minutes` or what the run's time limit has left, whichever is shorter. With
held-out evaluation its page has the benchmarks' table too.
"""
    limit = Limit(_approval_minutes, 1, ("approval_timeout_minutes",))
    operator_extra_links = (ExportLink(),)
    approval_case: ApprovalCase | None = None  # execute's: the notifier's (note, notice)

    def __init__(self, **kwargs: Any) -> None:
        from tpu_rl.settings.params import default_settings

        kwargs.setdefault("subject", "Promote this run's export?")
        # what a timeout answers; execute sets the run's approval_timeout_answer
        kwargs.setdefault("defaults", ApprovalOperator.REJECT)
        kwargs.setdefault("notifiers", [ApprovalRequestNotifier()])
        if RESPONSE_TIMEOUT:
            minutes = default_settings().approval_timeout_minutes
            kwargs.setdefault("response_timeout", timedelta(minutes=minutes))
        super().__init__(**kwargs)

    def execute(self, context: Context) -> Any:
        from tpu_rl.dag.run_limits import time_left
        from tpu_rl.promotion.approval_text import (
            ANSWER_KEY,
            NOT_REQUIRED,
            ApprovalCase,
            approval_body,
            timeout_option,
        )
        from tpu_rl.promotion.exported import champion_comparison, exported_model, heldout_result
        from tpu_rl.report.run_cost import count_run_cost

        layout = self.run_layout(context)
        ti = context["ti"]
        s = layout.settings
        heldout = heldout_result(ti, s)
        hold = self.reward_hacking_hold(context, s.hold_length_drift, heldout)
        if s.approval != "required" and hold is None:
            self.log.info("approval=none: the export is promoted without asking.")
            ti.xcom_push(key=ANSWER_KEY, value={"approval": NOT_REQUIRED})
            return {"approval": NOT_REQUIRED}
        if s.approval == "required":
            # approval_timeout_minutes, capped at the run's work deadline (RunStep.pre_execute)
            self.response_timeout = time_left(self) or timedelta(minutes=s.approval_timeout_minutes)
        else:  # held: the step's limit counts no person's wait (validate's budget)
            self.response_timeout = held_wait(context, s)
        # what the scheduler answers at the timeout, and the option the form highlights: the
        # request's `defaults` (Airflow 3.3 jobs/scheduler_job_runner.py
        # check_awaiting_input_timeouts; HITLTrigger._handle_timeout before it)
        self.defaults = [timeout_option(s.approval_timeout_answer)]
        gate = ti.xcom_pull(task_ids=Step.GATE)
        case = ApprovalCase(
            run_id=layout.run_id,
            export=exported_model(ti),
            gate=gate if isinstance(gate, dict) else None,
            comparison=champion_comparison(ti),
            tpu=count_run_cost(layout, context),  # to now: the cluster is gone
            capacity=s.capacity,
            timeout_option=self.defaults[0],
            deadline=datetime.now(UTC) + self.response_timeout,
            hold=hold,
            heldout=heldout,
        )
        self.approval_case = case
        self.body = approval_body(case)
        return super().execute(context)

    def reward_hacking_hold(
        self, context: Context, max_drift: float, heldout: HeldoutReport | None = None
    ) -> Hold | None:
        """The evidence of reward hacking in the training's curves (wait_for_rewards' XCom) and
        in the held-out evaluation's report (a guard benchmark fallen, or a verdict worse than
        the base model while the reward rose), which makes a person approve whatever the run's
        approval setting; None without."""
        from tpu_rl.heldout.hold import heldout_hold, joined, length_drift_hold
        from tpu_rl.promotion.exported import exported_model
        from tpu_rl.watch.curves import XCOM_KEY

        if not max_drift and heldout is None:  # both holds are off: nothing to read
            return None
        ti = context["ti"]
        found = ti.xcom_pull(task_ids=Step.WAIT_FOR_REWARDS, key=XCOM_KEY)
        found = found if isinstance(found, dict) else None
        try:
            step = exported_model(ti).step
        except ValueError:  # no export result: judged on the whole curves
            step = None
        step = step if isinstance(step, int) else None
        hold = joined(length_drift_hold(found, max_drift, step), heldout_hold(heldout, found, step))
        if hold is not None:
            from tpu_rl.promotion.approval_text import HOLD_KEY

            evidence = "; ".join(hold.evidence)
            self.log.warning("Promotion waits for a person: %s (%s)", hold.reason, evidence)
            ti.xcom_push(key=HOLD_KEY, value=hold.reason)  # for the run's verdict
        return hold

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        """The answer, kept as the XCom `answer` first: on Reject the operator skips `promote`
        by raising (the Task SDK's SkipMixin._set_state_to_skipped: DownstreamTasksSkipped), so
        no return value is pushed, and the run's verdict still says who rejected."""
        from tpu_rl.promotion.approval_text import ANSWER_KEY

        if "error" not in event:
            answer = {k: event.get(k) for k in ("chosen_options", "responded_by_user")}
            context["ti"].xcom_push(key=ANSWER_KEY, value=answer)
        return super().execute_complete(context, event)


class PromoteExportOperator(EmitsLineage):
    """Makes the verified export the deployment's champion: the champion record, an event of
    every outlet Asset, and a new version in Vertex AI Model Registry when the deployment has
    one (tpu_rl.deployment.vertex_registry)."""

    step_id = Step.PROMOTE
    step_doc = """
Makes the verified export this deployment's champion for the model: writes
`gs://<bucket>/<model>/champions/<deployment>.json` (the previous champion's export is kept in
its `previous` list), emits the `tpu_rl_champion_model` asset event with the metrics, run id and
step, and, when the deployer set `TPU_RL_VERTEX_REGISTRY`, uploads the export as a new version of
that Vertex AI Model Registry model and moves its `champion` alias there (earlier versions stay);
with held-out evaluation the version's labels carry its step, scores and verdicts.

It promotes only over the champion `compare_champion` compared with: when another run promoted
since, it fails and changes nothing (trigger a new run to compare with the new champion). The
registration comes first and the record last; a record that cannot be written moves the alias
back, so both change or neither does. **Failed?** Its error, and the run's note, say which state
it left; a corrupt champion record is named with how to fix or restore it.
"""
    limit = short_step(1)
    operator_extra_links = (ExportLink(),)
    promoted: dict[str, Any] | None = None  # the champion record written, once written

    def step_lineage(self, layout: RunLayout) -> StepLineage:
        """The export -> the champion record and the Vertex AI version it registered."""
        from tpu_rl.lineage import names
        from tpu_rl.lineage.graph import promote_lineage

        version = (self.promoted or {}).get("registry_version")
        return promote_lineage(
            names.export_folder(layout),
            names.champion_record(layout),
            names.vertex_model_version(version) if version else None,
        )

    def execute(self, context: Context) -> dict[str, Any]:
        from airflow.providers.common.compat.sdk import AirflowFailException

        from tpu_rl import deployment
        from tpu_rl.promotion.exported import champion_comparison, exported_model, heldout_result
        from tpu_rl.promotion.promote import STATE_XCOM, PromotionFailed, promote_export

        layout = self.run_layout(context)
        ti = context["ti"]
        export = exported_model(ti)
        try:
            result = promote_export(
                layout,
                export,
                champion_comparison(ti),
                deployment.gcp_conn_id(),
                self.log,
                heldout=heldout_result(ti, layout.settings),
            )
        except PromotionFailed as err:
            # the state it left, for the run's note (outcome reads it); one line, no traceback
            ti.xcom_push(key=STATE_XCOM, value=err.state)
            raise AirflowFailException(str(err)) from None
        self.promoted = result
        event = {k: result[k] for k in ("export_uri", "run_id", "step", "metrics")}
        for asset in self.outlets:
            context["outlet_events"][asset].extra = event
        return result
