"""Champion against challenger: the deployment's champion scored again on the run's evaluation
set (a Job on the run's backend), then compared with this run's export."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from airflow.providers.standard.utils.skipmixin import SkipMixin

from tpu_rl.dag.limits import SIDE, setting_minutes, short_step
from tpu_rl.dag.links import JOB_LINKS
from tpu_rl.names import Step
from tpu_rl.operators.job_steps import XCOM_RETURN_KEY
from tpu_rl.operators.jobs import RunJobStep
from tpu_rl.operators.run_step import RunStep

if TYPE_CHECKING:
    from airflow.sdk import Context

    from tpu_rl.jobs.manifests import Manifest
    from tpu_rl.layout import RunLayout

# evaluate_champion's XCom keys: the record it evaluated, and its metrics (a Job step's return
# value is not pushed: KubernetesPodOperator's do_xcom_push defaults to False, and True would
# add the provider's XCom sidecar to the Job's pod)
CHAMPION_XCOM = "champion"
METRICS_XCOM = "metrics"
# the record's GCS generation as evaluate_champion read it: promote replaces only that one
GENERATION_XCOM = "champion_generation"


class EvaluateChampionOperator(RunJobStep):
    """Scores the deployment's champion checkpoint on this run's evaluation set and settings:
    train_rl with the champion's parameters loaded and no training step, on the run's Pathways
    backend (kept running for it by the reward wait). Pushes the champion record (CHAMPION_XCOM)
    and the metrics of the Job's `Pre RL Training` line (METRICS_XCOM). No champion: skips."""

    step_id = Step.EVALUATE_CHAMPION
    pods_of = "champion"
    step_doc = """
Scores the deployment's current champion (the export last promoted for this model) on this
run's evaluation set and settings, on the run's TPUs before they are released: MaxText's
`train_rl` with the champion's checkpoint loaded and no training step; its `Pre RL Training`
line is the result. Skipped on a deployment's first run: there is no champion yet, and this
run's export becomes the first candidate.

**Failed?** The task log has the client's last lines; *Pod logs* opens the whole log.
"""
    # beside gate, export and verify (it delays only compare_champion and stop_backend)
    limit = setting_minutes("champion_eval_timeout_minutes", 2, role=SIDE)
    operator_extra_links = JOB_LINKS

    def prepare(self, layout: RunLayout, context: Context) -> Manifest:
        from airflow.providers.common.compat.sdk import AirflowFailException, AirflowSkipException

        from tpu_rl.jobs import manifests
        from tpu_rl.jobs.maxtext_flags import checkpoint_parameters
        from tpu_rl.promotion.champion import ChampionRecordError, ChampionStore
        from tpu_rl.promotion.comparison import NO_CHAMPION

        store = ChampionStore(layout.model_root, layout.deployment, self.gcp_conn_id)
        try:
            record = store.read()
        except ChampionRecordError as err:  # its path, what is wrong, the fix: one line
            raise AirflowFailException(str(err)) from None
        if record is None:
            raise AirflowSkipException(NO_CHAMPION)
        self.check_backend(layout)
        self.log.info(
            "Evaluating the champion from run %s (step %s): %s",
            record.run_id,
            record.step,
            record.checkpoint_uri,
        )
        context["ti"].xcom_push(key=CHAMPION_XCOM, value=record.as_dict())
        context["ti"].xcom_push(key=GENERATION_XCOM, value=store.generation)
        parameters = checkpoint_parameters(record.checkpoint_uri)
        return manifests.champion_evaluation_job(layout, parameters)

    def check_backend(self, layout: RunLayout) -> None:
        """The client needs the run's backend: fail, saying so, when it is gone (the reward
        wait keeps it only when it saw a champion)."""
        from airflow.providers.common.compat.sdk import AirflowFailException
        from kubernetes.client import CustomObjectsApi

        from tpu_rl.backend.lifecycle import found_backend

        if found_backend(CustomObjectsApi(self.hook.get_conn()), layout) is None:
            raise AirflowFailException(
                f"backend {layout.backend_jobset} is gone (the reward wait saw no champion and "
                "released it): the champion cannot be evaluated in this run"
            )

    def execute_complete(
        self, context: Context, event: dict[str, Any], **kwargs: Any
    ) -> dict[str, Any]:
        """The Job succeeded: its `Pre RL Training` line's metrics (the loaded champion's)."""
        from airflow.providers.common.compat.sdk import AirflowException

        from tpu_rl.jobs.failed_pods import pod_log_text
        from tpu_rl.training_log.lines import parse_lines

        super().execute_complete(context, event, **kwargs)
        namespace = event.get("pod_namespace") or event.get("namespace") or self.namespace
        lines: list[str] = []
        for pod in event.get("pod_names") or []:
            lines += pod_log_text(self.hook.core_v1_client, pod, namespace).splitlines()
        pre = parse_lines(lines).pre
        if pre is None:
            raise AirflowException(
                "the champion's evaluation logged no complete `Pre RL Training` line "
                "(num_test_batches=0, or a MaxText build that does not log it)"
            )
        metrics = pre.metrics.as_dict()
        self.log.info("Champion scored: %s", metrics)
        context["ti"].xcom_push(key=METRICS_XCOM, value=metrics)
        return metrics


class CompareChampionOperator(RunStep, SkipMixin):
    """Challenger (this run's exported step's evaluation) against the champion's evaluation
    of this run (evaluate_champion) with the run's `min_gain_over_champion`. Returns the
    comparison (tpu_rl.promotion.comparison); a challenger that loses skips what follows
    (approval, promotion) but not the teardowns: not a failure, the export stays."""

    step_id = Step.COMPARE_CHAMPION
    step_doc = """
Compares this run's exported model with the deployment's champion, both scored on this run's
evaluation set: it must beat the champion by `min_gain_over_champion` on each metric named
there; with held-out evaluation, it must answer the held-out items significantly better than
the champion did, or on a deployment's first run the base model ("not distinguishable" is not
enough). When it does not (or a metric is
missing or NaN) the steps that would promote it are skipped; the export stays where it is and
the run still succeeds, its note saying why. The first run of a deployment has no champion to
beat.
"""
    limit = short_step(1)
    inherits_from_skipmixin: ClassVar[bool] = True

    def __init__(self, **kwargs: Any) -> None:
        # evaluate_champion skips on a deployment's first run: compare anyway
        kwargs.setdefault("trigger_rule", "none_failed")
        super().__init__(**kwargs)

    def execute(self, context: Context) -> dict[str, Any]:
        from tpu_rl.promotion.comparison import compare_with_champion, on_heldout
        from tpu_rl.promotion.exported import heldout_result

        ti = context["ti"]
        settings = self.run_layout(context).settings
        champion = ti.xcom_pull(task_ids=Step.EVALUATE_CHAMPION, key=CHAMPION_XCOM)
        result = compare_with_champion(
            champion,
            ti.xcom_pull(task_ids=Step.EVALUATE_CHAMPION, key=METRICS_XCOM) if champion else None,
            challenger_metrics(
                ti.xcom_pull(task_ids=Step.EXPORT), ti.xcom_pull(task_ids=Step.WAIT_FOR_REWARDS)
            ),
            settings.min_gain_over_champion,
        )
        if report := heldout_result(ti, settings):
            result = on_heldout(result, report)
        # the record compared with (0: none existed): promote replaces that one or fails
        result["champion_generation"] = (
            ti.xcom_pull(task_ids=Step.EVALUATE_CHAMPION, key=GENERATION_XCOM) if champion else 0
        )
        self.log.info("%s", result["reason"])
        if not result["beats"]:
            # pushed first: the Task SDK's skip raises (SkipMixin._set_state_to_skipped:
            # DownstreamTasksSkipped), so a returned value would never be pushed
            ti.xcom_push(key=XCOM_RETURN_KEY, value=result)
            self.skip_promotion(context)
        return result

    def skip_promotion(self, context: Context) -> None:
        """Skip every task downstream but the teardowns (ShortCircuitOperator's way:
        airflow/providers/standard/operators/python.py, ShortCircuitOperator.execute)."""
        tasks = [t for t in context["task"].get_flat_relatives(upstream=False) if not t.is_teardown]
        if tasks:
            self.log.info("Skipping %s.", ", ".join(sorted(t.task_id for t in tasks)))
            self.skip(ti=context["ti"], tasks=tasks)


def challenger_metrics(export: Any, rewards: Any) -> dict[str, Any] | None:
    """The exported step's evaluation: export's `metrics` when it reports them, else the
    `Post RL Training` line (the newest checkpoint's, which export exports by default)."""
    if isinstance(export, dict) and isinstance(metrics := export.get("metrics"), dict):
        return metrics
    post = rewards.get("post") if isinstance(rewards, dict) else None
    return post if isinstance(post, dict) else None
