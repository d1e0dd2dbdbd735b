"""The training curves of a few runs for the RL page (its live charts and its compare view):
loss, KL, batch reward mean and spread, completion length per step (tpu_rl.watch.curves, the
reward wait's XCom), the saves the log showed and the newest of them Orbax keeps, and the
watchdog's thresholds from each run's settings (tpu_rl.watch.health.Rules).

Read per request for the runs asked only (at most MAX_RUNS): the list of runs (tpu_rl.ui.runs)
never carries them, so a page of 500 runs stays small. A value of the wrong shape costs its run
its curves (`error` says why), never the answer.
"""

from __future__ import annotations

from typing import Any

from airflow.models.dagrun import DagRun
from airflow.models.xcom import XComModel
from sqlalchemy import Text, cast, select
from sqlalchemy.orm import Session

from tpu_rl.names import DAG_ID, Step
from tpu_rl.ui import checks
from tpu_rl.ui.runs import ROW_ERRORS, row_reason, run_settings
from tpu_rl.watch import curves
from tpu_rl.watch.health import Rules

MAX_RUNS = 8
# the page's name of each curve, and its TensorBoard tag
NAMES = {
    "loss": curves.LOSS,
    "kl": curves.KL,
    "reward_mean": curves.REWARD_MEAN,
    "reward_max": curves.REWARD_MAX,
    "reward_min": curves.REWARD_MIN,
    "completion_length": curves.LENGTH,
}


def thresholds(rules: Rules) -> dict[str, float | None]:
    """The watchdog's fixed lines on the curves (None: the rule is off): |loss| past the spike
    floor, KL past its floor (each also relative to its own median), and the evaluations'
    largest mean_reward drop from the best."""
    return {
        "loss": rules.spike_floor if rules.spike_factor else None,
        "kl": rules.kl_floor if rules.kl_factor else None,
        "reward_drop": rules.reward_drop or None,
    }


def fetch_curves(session: Session, run_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Each asked run's curves, saves, kept checkpoints and thresholds, by run id (a run id the
    DAG has not: absent)."""
    runs = session.execute(
        select(DagRun.id, DagRun.run_id, cast(DagRun.conf, Text).label("conf")).where(
            DagRun.dag_id == DAG_ID, DagRun.run_id.in_(run_ids[:MAX_RUNS])
        )
    ).all()
    values = dict(
        session.execute(
            select(XComModel.dag_run_id, cast(XComModel.value, Text)).where(
                XComModel.dag_run_id.in_([r.id for r in runs]),
                XComModel.task_id == Step.WAIT_FOR_REWARDS,
                XComModel.key == curves.XCOM_KEY,
                XComModel.map_index == -1,
            )
        ).all()
    )
    return {run.run_id: _run_curves(run.conf, values.get(run.id)) for run in runs}


def _run_curves(conf: str | None, value: str | None) -> dict[str, Any]:
    errors, found = [], {}
    try:
        found = checks.curves(checks.parsed(value)) if value is not None else {}
    except checks.Malformed as error:
        errors.append(f"curves: {error}")
    try:
        lines = thresholds(Rules.from_settings(run_settings(conf)))
    except ROW_ERRORS as error:
        errors.append(f"thresholds: {row_reason(error)}")
        lines = {}
    saves = list(found.get("saves") or [])
    return {
        "curves": {name: curves.points(found, tag) for name, tag in NAMES.items()},
        "saves": saves,
        "kept": saves[-curves.CHECKPOINTS_KEPT :],
        "thresholds": lines,
        "error": "; ".join(errors) or None,
    }
