"""The DAG's Params and the settings' defaults, read from `params.json`: generated from the
settings' declaration by tpu_rl.settings.param_specs, so the form and the code cannot drift; the
DAG files' parse reads this data, not the declaration."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from airflow.sdk import Param

SPECS_FILE = Path(__file__).with_name("params.json")
ESTIMATE_FIELD = "capacity"  # the form field whose description shows the cost estimate
# Airflow validates every Param at each task start, the schema against its dialect's metaschema
# first: draft-07's is the cheaper check than the default 2020-12's, and the schemas use no
# keyword newer than draft-07.
SCHEMA_DIALECT = {"$schema": "http://json-schema.org/draft-07/schema#"}


@functools.cache
def specs() -> dict[str, dict[str, Any]]:
    """Each setting's Param as data: its default and JSON-schema keywords (read once; never
    changed: each Param gets its own top-level schema)."""
    return json.loads(SPECS_FILE.read_text())


def default_settings() -> Any:
    """The settings' defaults as attributes, as RunSettings() has them (choices as plain
    strings), read from params.json."""
    return SimpleNamespace(**{name: spec["default"] for name, spec in specs().items()})


def with_estimate(spec: dict[str, Any]) -> dict[str, Any]:
    """A Param's spec with its text and, after it, the estimate of the form's defaults as a
    Markdown table.

    Airflow 3.3.2's trigger form shows a Param's `description` as plain text or, when that is
    null, its schema's `description_md` as Markdown (airflow/ui's FieldRow: `l.description===
    null?l.schema.description_md===void 0?void 0:...`) under the field; it does not show the
    DAG's doc_md (only the DAG page's "Dag Docs" does)."""
    from tpu_rl.report.estimate import estimate_run, estimate_table

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
