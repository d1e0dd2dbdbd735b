"""The provenance view's reads (tpu_rl.ui.provenance_view): a run's records from Airflow's
metadata DB in three small queries (the run, the XComs the chain reads, approve's end), and the
deployment's champion record from GCS with the deployment's Google connection, as the tasks
read it.

A value of the wrong shape is left out (its link then says it was not kept) and named in the
answer's `error`; a champion record GCS does not give is said in the champion's line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.models.dagrun import DagRun
from airflow.models.taskinstance import TaskInstance
from airflow.models.xcom import XCOM_RETURN_KEY, XComModel
from sqlalchemy import Text, and_, cast, or_, select
from sqlalchemy.orm import Session

from tpu_rl import deployment
from tpu_rl.heldout.report import report_of
from tpu_rl.layout import RunLayout
from tpu_rl.names import DAG_ID, Step
from tpu_rl.promotion.approval_text import ANSWER_KEY, HOLD_KEY
from tpu_rl.promotion.champion import ChampionRecord, ChampionStore
from tpu_rl.promotion.promote import STATE_XCOM
from tpu_rl.run_record import (
    SETTINGS_TASK,
    RecordedBeforeIdentities,
    recorded_deployment,
    recorded_settings,
)
from tpu_rl.settings.fields import SETTING_FIELDS, RunSettings
from tpu_rl.token_masking import redact_secrets
from tpu_rl.ui import checks
from tpu_rl.ui.checks import Malformed
from tpu_rl.ui.provenance_view import RunRecords, champion_status, provenance_view
from tpu_rl.ui.runs import ROW_ERRORS, row_reason

# the XComs the chain reads: (task, key) -> RunRecords' field ("record": validate's)
RECORDS = {
    (SETTINGS_TASK, XCOM_RETURN_KEY): "record",
    (Step.EXPORT, XCOM_RETURN_KEY): "export",
    (Step.EVALUATE_HELDOUT, XCOM_RETURN_KEY): "heldout",
    (Step.COMPARE_CHAMPION, XCOM_RETURN_KEY): "comparison",
    (Step.APPROVE, ANSWER_KEY): "approval",
    (Step.APPROVE, HOLD_KEY): "held",
    (Step.PROMOTE, XCOM_RETURN_KEY): "promoted",
    (Step.PROMOTE, STATE_XCOM): "promote_failed",
}
# what each must be; the others are read as they are (approve's answer: approval_decision)
OBJECTS = ("record", "export", "comparison", "promoted")
TEXTS = ("held", "promote_failed")


def run_provenance(session: Session, run_id: str) -> dict[str, Any]:
    """The provenance view of the run's export (provenance_view), with the champion's status;
    LookupError when the DAG has no such run."""
    dag_run_id = session.scalar(
        select(DagRun.id).where(DagRun.dag_id == DAG_ID, DagRun.run_id == run_id)
    )
    if dag_run_id is None:
        raise LookupError(f"{DAG_ID} has no run {run_id!r}.")
    values, errors = _values(session, dag_run_id)
    try:
        layout = _layout(values.get("record"), run_id)
    except LookupError as why:
        return {"run_id": run_id, "champion": None, "links": [], "error": f"No provenance: {why}"}
    records = RunRecords(
        layout=layout,
        export=values.get("export"),
        heldout=_heldout(values.get("heldout"), errors),
        comparison=values.get("comparison"),
        approval=values.get("approval"),
        approved_at=session.scalar(
            select(TaskInstance.end_date).where(
                TaskInstance.dag_id == DAG_ID,
                TaskInstance.run_id == run_id,
                TaskInstance.task_id == Step.APPROVE,
                TaskInstance.map_index == -1,
            )
        ),
        held=values.get("held"),
        promoted=values.get("promoted"),
        promote_failed=values.get("promote_failed"),
    )
    view = provenance_view(records, champion(layout, records.promoted))
    if errors:
        said = "; ".join(errors)
        view["error"] = f"{view['error']}; {said}" if view["error"] else f"Not read: {said}"
    return view


def _values(session: Session, dag_run_id: int) -> tuple[dict[str, Any], list[str]]:
    """The run's records by RunRecords' field, each of the shape it must have, and what was
    left out (a value of another shape) in a line each."""
    rows = session.execute(
        select(
            XComModel.task_id,
            XComModel.key,
            cast(XComModel.value, Text).label("value"),  # parsed per value: checks.parsed
        ).where(
            XComModel.dag_run_id == dag_run_id,
            XComModel.map_index == -1,
            or_(*(and_(XComModel.task_id == t, XComModel.key == k) for t, k in RECORDS)),
        )
    )
    values: dict[str, Any] = {}
    errors = []
    for row in rows:
        field = RECORDS[(row.task_id, row.key)]
        try:
            value = checks.parsed(row.value)
        except Malformed as error:
            errors.append(f"{row.task_id}'s {row.key}: {error}")
            continue
        if value is None:
            continue
        if field in OBJECTS and not isinstance(value, Mapping):
            errors.append(f"{row.task_id}'s {row.key} should be an object: left out")
        elif field in TEXTS and not isinstance(value, str):
            errors.append(f"{row.task_id}'s {row.key} should be a text: left out")
        else:
            values[field] = value
    return values, errors


def _layout(record: Any, run_id: str) -> RunLayout:
    """The run's layout from validate's record (its settings and deployment identity), as the
    console links make it (tpu_rl.dag.link_urls); LookupError saying why when it has none."""
    try:
        identity = recorded_deployment(record, run_id)
    except RecordedBeforeIdentities:
        raise LookupError(
            "validate recorded no deployment identity (a run from before identities): its "
            "folders' names cannot be derived"
        ) from None
    values = recorded_settings(record)
    settings = RunSettings(**{k: v for k, v in values.items() if k in SETTING_FIELDS})
    return RunLayout(settings, run_id, identity)


def _heldout(value: Any, errors: list[str]) -> Any:
    """evaluate_heldout's report; None (and why in `errors`) when it is not one."""
    try:
        return report_of(checks.heldout_report(value))
    except ROW_ERRORS as error:
        errors.append(f"evaluate_heldout's report: {row_reason(error)}")
        return None


def champion(layout: RunLayout, promoted: Mapping[str, Any] | None) -> dict[str, Any]:
    """The champion's status (provenance_view.champion_status) from the deployment's champion
    record for the run's model, read from GCS now."""
    store = ChampionStore(layout.model_root, layout.deployment, deployment.gcp_conn_id())
    record: ChampionRecord | None = None
    error = None
    try:
        record = store.read()
    except Exception as err:  # not a record, GCS's refusal, no credentials: said in a line
        error = redact_secrets(" ".join(f"{type(err).__name__}: {err}".split()))
    return champion_status(layout, store.uri, record, promoted, error)
