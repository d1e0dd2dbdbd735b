"""Held-out evaluation: MaxText's evaluator scores the run's best committed steps, the base
model and the deployment's champion on the same benchmark items, on the slice once the Pathways
backend has let go of it; the paired verdict on those items picks the step to export and judges
it (tpu_rl.heldout.report)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tpu_rl.dag.limits import STEP_MINUTES, Limit
from tpu_rl.dag.links import JOB_LINKS
from tpu_rl.names import Step
from tpu_rl.operators.job_steps import XCOM_RETURN_KEY
from tpu_rl.operators.jobs import RunJobStep
from tpu_rl.operators.lineage import EmitsLineage

if TYPE_CHECKING:
    from airflow.sdk import Context

    from tpu_rl.heldout.report import HeldoutReport, ItemResults
    from tpu_rl.jobs.heldout_job import HeldoutModel
    from tpu_rl.jobs.manifests import Manifest
    from tpu_rl.layout import RunLayout
    from tpu_rl.lineage.graph import StepLineage
    from tpu_rl.settings.fields import RunSettings

MODELS_XCOM = "models"  # [label, checkpoint] of each model the Job scores


def heldout_limit_minutes(s: RunSettings) -> float:
    """The step's limit: the capacity wait, then each model's limit (the steps, the base and a
    champion); a short step when the evaluation is off (it skips)."""
    if not s.heldout_tasks:
        return STEP_MINUTES
    return s.pending_timeout_minutes + s.heldout_timeout_minutes * (s.heldout_top_k + 2)


class EvaluateHeldoutOperator(EmitsLineage, RunJobStep):
    """Scores the candidates on `heldout_tasks` and `heldout_guard_tasks`; returns the
    HeldoutReport (as_dict) its per-item results give. Skips when heldout_tasks is empty.
    `rewards`: the reward wait's result (templated: an XComArg is pulled)."""

    step_id = Step.EVALUATE_HELDOUT
    pods_of = "heldout"
    step_doc = """
Scores this run's best committed steps (`heldout_top_k`: the best by the trainer's evaluation,
then the newest), the base model and the deployment's champion on the held-out benchmarks
(`heldout_tasks`, and the guards of `heldout_guard_tasks`), on the run's TPUs once
`stop_backend` has released them: MaxText's evaluator (`maxtext.eval`, lm-eval) loads each
checkpoint in vLLM and answers the same items. Each item's result is kept in the run's
`heldout/` folder. The best step on those items is the one exported; the gate (a loss against
the base model) and the champion comparison (a gain) take its paired verdict (McNemar's exact
test at `heldout_significance`).
Skipped when `heldout_tasks` is empty.

**Failed?** The task log has the evaluator's last lines; *Pod logs* opens the whole log. A
missing samples file names the model and the benchmark.
"""
    limit = Limit(
        heldout_limit_minutes,
        1,
        (
            "heldout_tasks",
            "pending_timeout_minutes",
            "heldout_timeout_minutes",
            "heldout_top_k",
        ),
    )
    operator_extra_links = JOB_LINKS
    template_fields: Sequence[str] = (*RunJobStep.template_fields, "rewards")
    report: dict[str, Any] | None = None  # the HeldoutReport (as_dict), once made

    def __init__(self, *, rewards: Any = None, **kwargs: Any) -> None:
        # however stop_backend ended (a failed champion evaluation leaves it upstream_failed):
        # off, it skips and the gate judges the run as without it; on, it checks the slice
        kwargs.setdefault("trigger_rule", "all_done")
        super().__init__(**kwargs)
        self.rewards = rewards

    def step_lineage(self, layout: RunLayout) -> StepLineage | None:
        """The scored steps, the base model and the champion's checkpoint (the record it was
        scored against: promote has not run yet) -> the held-out results; nothing before the
        report is made."""
        from tpu_rl.heldout.report import HeldoutReport
        from tpu_rl.lineage import names
        from tpu_rl.lineage.graph import heldout_lineage
        from tpu_rl.promotion.champion import ChampionStore

        if self.report is None:
            return None
        found = HeldoutReport.from_dict(self.report)
        record = ChampionStore(layout.model_root, layout.deployment, self.gcp_conn_id).read()
        return heldout_lineage(
            [names.checkpoint_step(layout, step) for step in sorted(found.step_scores)],
            names.converted_checkpoint(layout),
            names.gcs_dataset(record.checkpoint_uri) if record else None,
            names.heldout_results(layout),
        )

    def lineage_facets(self, layout: RunLayout) -> dict[str, dict[str, Any]]:
        """The TPUs and images it ran on; the held-out evaluation: scores and verdicts."""
        from tpu_rl.lineage.facets import EVALUATION, KEYS, heldout_evaluation_facet

        if self.report is None:
            return {}
        facets = self.tpu_facets(layout, self.ran_image_digests(layout))
        return {**facets, KEYS[EVALUATION]: heldout_evaluation_facet(self.report)}

    def prepare(self, layout: RunLayout, context: Context) -> Manifest:
        from airflow.providers.common.compat.sdk import AirflowSkipException

        from tpu_rl.jobs.heldout_job import heldout_evaluation_job

        if not layout.settings.heldout_tasks:
            raise AirflowSkipException("held-out evaluation is off (heldout_tasks is empty)")
        if not self.rewards:
            raise AirflowSkipException("the reward wait ended without a result: nothing to score")
        self.check_slice_free(layout)
        models = self.models(layout)
        self.log.info(
            "Scoring %s on %s.",
            ", ".join(f"{m.label} ({m.checkpoint})" for m in models),
            ", ".join([*layout.settings.heldout_tasks, *layout.settings.heldout_guard_tasks]),
        )
        context["ti"].xcom_push(key=MODELS_XCOM, value=[list(m) for m in models])
        return heldout_evaluation_job(layout, models)

    def check_slice_free(self, layout: RunLayout) -> None:
        """Fail, saying so, while the run's Pathways backend still holds the slice's chips (its
        workers take every chip of each host: the evaluator's pods could never start)."""
        from airflow.providers.common.compat.sdk import AirflowFailException
        from kubernetes.client import CustomObjectsApi

        from tpu_rl.backend.lifecycle import found_backend

        if found_backend(CustomObjectsApi(self.hook.get_conn()), layout) is not None:
            raise AirflowFailException(
                f"backend {layout.backend_jobset} still holds the slice's chips (stop_backend did "
                "not delete it): the held-out evaluation cannot run"
            )

    def models(self, layout: RunLayout) -> list[HeldoutModel]:
        """The candidate steps, then the base model (the converted checkpoint) and the champion
        (when the deployment has one)."""
        from airflow.providers.common.compat.sdk import AirflowFailException

        from tpu_rl.checkpoints.checkpoint_choice import heldout_candidates
        from tpu_rl.heldout.report import BASE, CHAMPION, step_label
        from tpu_rl.jobs.heldout_job import HeldoutModel
        from tpu_rl.jobs.maxtext_flags import checkpoint_parameters
        from tpu_rl.promotion.champion import ChampionRecordError, ChampionStore

        s = layout.settings
        steps = heldout_candidates(
            layout.checkpoints_dir, self.gcp_conn_id, self.rewards, s.best_metric, s.heldout_top_k
        )
        if not steps:
            raise AirflowFailException(
                f"no committed checkpoint under {layout.checkpoints_dir} to score"
            )
        models = [HeldoutModel(step_label(step), layout.checkpoint_params(step)) for step in steps]
        models.append(HeldoutModel(BASE, layout.maxtext_items))
        try:
            record = ChampionStore(layout.model_root, layout.deployment, self.gcp_conn_id).read()
        except ChampionRecordError as err:
            raise AirflowFailException(str(err)) from None
        if record is not None:
            models.append(HeldoutModel(CHAMPION, checkpoint_parameters(record.checkpoint_uri)))
        return models

    def execute_complete(
        self, context: Context, event: dict[str, Any], **kwargs: Any
    ) -> dict[str, Any]:
        """The Job succeeded: the report of the models' kept samples."""
        from airflow.providers.common.compat.sdk import AirflowException

        from tpu_rl.heldout.report import BASE, CHAMPION, heldout_report

        super().execute_complete(context, event, **kwargs)
        layout = self.run_layout(context)
        s = layout.settings
        labels = [label for label, _ in context["ti"].xcom_pull(key=MODELS_XCOM) or []]
        results = {label: self.read_items(layout, label) for label in labels}
        steps = {
            int(label.removeprefix("step-")): items
            for label, items in results.items()
            if label.startswith("step-")
        }
        references = {k: results[k] for k in (BASE, CHAMPION) if k in results}
        try:
            report = heldout_report(
                steps, references, s.heldout_tasks, s.heldout_guard_tasks, s.heldout_significance
            )
        except ValueError as err:
            raise AirflowException(f"held-out evaluation: {err}") from None
        self.log_report(report)
        result = report.as_dict()
        self.report = result
        context["ti"].xcom_push(key=XCOM_RETURN_KEY, value=result)
        return result

    def read_items(self, layout: RunLayout, label: str) -> dict[str, ItemResults]:
        """One model's per-item results by task, from the samples its command kept."""
        import json

        from airflow.providers.common.compat.sdk import AirflowException

        from tpu_rl import storage
        from tpu_rl.heldout.samples import item_results, reported_metric
        from tpu_rl.jobs.heldout_job import SAMPLES_FILE

        s = layout.settings
        found: dict[str, ItemResults] = {}
        for task in [*s.heldout_tasks, *s.heldout_guard_tasks]:
            uri = layout.heldout_samples_dir(label) + SAMPLES_FILE.format(task=task)
            text = storage.read_text(uri, self.gcp_conn_id)
            if text is None:
                raise AirflowException(
                    f"held-out evaluation: {label} kept no samples of {task}: {uri} is missing"
                )
            try:
                samples = json.loads(text)
                metric, filter_name = reported_metric(samples)
                found[task] = item_results(samples, metric, filter_name)
            except ValueError as err:
                raise AirflowException(f"held-out evaluation: {uri}: {err}") from None
        return found

    def log_report(self, report: HeldoutReport) -> None:
        from tpu_rl.heldout.report import BASE, CHAMPION

        scores = ", ".join(f"step {k}: {v:.1%}" for k, v in report.step_scores.items())
        self.log.info("Held-out score per step: %s; the best: step %d.", scores, report.step)
        for reference in (BASE, CHAMPION):
            for line in report.reasons(reference):
                self.log.info("%s", line)
        for line in report.guard_falls():
            self.log.warning("%s", line)
