"""The run DAG's Params: one per setting (tpu_rl.settings.params), the `capacity` field carrying
the estimate of what the form's defaults cost (tpu_rl.report.estimate)."""

from __future__ import annotations

from typing import Any

from airflow.sdk import Param

from tpu_rl.report.estimate import estimate_run, estimate_table
from tpu_rl.settings.params import default_settings, specs

ESTIMATE_FIELD = "capacity"  # the form field whose description shows the cost estimate


def with_estimate(spec: dict[str, Any]) -> dict[str, Any]:
    """A Param's spec with its text and, after it, the estimate of the form's defaults as a
    Markdown table.

    Airflow 3.3.2's trigger form shows a Param's `description` as plain text or, when that is
    null, its schema's `description_md` as Markdown (airflow/ui's FieldRow: `l.description===
    null?l.schema.description_md===void 0?void 0:...`) under the field; it does not show the
    DAG's doc_md (only the DAG page's "Dag Docs" does)."""
    table = estimate_table(estimate_run(default_settings()), "the defaults")
    text = spec.get("description") or spec.get("description_md") or ""
    return {**spec, "description": None, "description_md": f"{text}\n\n{table}".strip()}


def dag_params() -> dict[str, Param]:
    """One Param per setting, defaulting to the tutorial's value; the `capacity` field carries
    the estimate of what the defaults cost per capacity mode (with_estimate).

    Set them last, on the DAG alone: a task made while the DAG has Params keeps a deep copy,
    which Airflow's serializer validates Param by Param (jsonschema) on every parse; at run
    time the DAG's are merged in anyway (airflow.sdk.definitions.param.process_params).
    """
    shown = {**specs(), ESTIMATE_FIELD: with_estimate(specs()[ESTIMATE_FIELD])}
    return {name: Param(**spec) for name, spec in shown.items()}
