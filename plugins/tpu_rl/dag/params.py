"""The run DAG's Params: one per setting (tpu_rl.settings.params), the `capacity` field carrying
the estimate of what the form's defaults cost (tpu_rl.report.estimate).

The estimate is data, as the Params are: `defaults_estimate.md`, written by
python -m tpu_rl.dag.params (`make params`; a test fails when it is stale). Computing it on every
parse of the DAG file imported tpu_rl.report.estimate and its price table, about 6 ms of each
parse (`make bench`, parse_overhead_ms: imports_in_each_parse_ms).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from airflow.sdk import Param

from tpu_rl.names import ESTIMATE_PAGE
from tpu_rl.settings.params import default_settings, specs

ESTIMATE_FIELD = "capacity"  # the form field whose description shows the cost estimate
ESTIMATE_FILE = Path(__file__).with_name("defaults_estimate.md")


# Under the defaults' table: the estimate page (tpu_rl.ui.app) for the settings as filled in.
# Airflow 3.3.2's form renders a description_md link with target="_blank" (airflow/ui's Markdown
# components, installed bundle airflow/ui/dist/assets/index-*.js: `CPt=e=>{...(QO,{color:
# `fg.info`,fontWeight:`bold`,href:r,rel:`noopener noreferrer`,target:`_blank`...})}`), so the
# form stays filled in; its Advanced Options section holds the "Configuration JSON" the fields
# keep in step (the same bundle: configForm.advancedOptions, configForm.configJson). What is
# typed stays in the dialog's memory: its store is a plain zustand one (`fEt=()=>E$(e=>({conf:
# `{}`,...setConf...`), kept in no storage and no address, and the dialog prefills only from a
# past run (`prefillConfig`, its "Trigger with config"), so the link carries the defaults.
def estimate_link() -> str:
    """The link to the estimate page, its address holding the form's defaults (?conf=, which
    the page reads and estimates at once), where the settings are estimated as they are typed
    and the run triggered; and how to carry over what was changed in the form: the form keeps
    what is typed in memory only (no storage, no address), so no link can."""
    conf = quote(json.dumps(vars(default_settings()), separators=(",", ":")))
    return (
        f"**Your settings:** [Estimate these settings]({ESTIMATE_PAGE}?conf={conf}) (a new "
        "tab) opens this form's defaults: edit them there, see the table and every invalid "
        "setting as you type, and trigger the run from there. To bring what you changed "
        "here, paste there Advanced Options > Configuration JSON (bottom of this form)."
    )


def defaults_estimate() -> str:
    """What the form's defaults cost per capacity mode, as a Markdown table: its empty cell
    settings are the tutorial's cell's, as a run reads them (tpu_rl.settings.cell_defaults)."""
    from tpu_rl.report.estimate import estimate_run, estimate_table
    from tpu_rl.settings.cell_defaults import cell_defaults
    from tpu_rl.settings.fields import RunSettings

    form = vars(default_settings())
    return estimate_table(
        estimate_run(RunSettings(**{**form, **cell_defaults(form)})), "the defaults"
    )


def with_estimate(spec: dict[str, Any]) -> dict[str, Any]:
    """A Param's spec with its text and, after it, the estimate of the form's defaults as a
    Markdown table and the link to the estimate of the settings as filled in (estimate_link).

    Airflow 3.3.2's trigger form shows a Param's `description` as plain text or, when that is
    null, its schema's `description_md` as Markdown (airflow/ui's FieldRow: `l.description===
    null?l.schema.description_md===void 0?void 0:...`) under the field; it does not show the
    DAG's doc_md (only the DAG page's "Dag Docs" does)."""
    table = ESTIMATE_FILE.read_text().strip()
    text = spec.get("description") or spec.get("description_md") or ""
    shown = f"{text}\n\n{table}\n\n{estimate_link()}".strip()
    return {**spec, "description": None, "description_md": shown}


def dag_params() -> dict[str, Param]:
    """One Param per setting, defaulting to the tutorial's value; the `capacity` field carries
    the estimate of what the defaults cost per capacity mode (with_estimate).

    Set them last, on the DAG alone: a task made while the DAG has Params keeps a deep copy,
    which Airflow's serializer validates Param by Param (jsonschema) on every parse; at run
    time the DAG's are merged in anyway (airflow.sdk.definitions.param.process_params).
    """
    shown = {**specs(), ESTIMATE_FIELD: with_estimate(specs()[ESTIMATE_FIELD])}
    return {name: Param(**spec) for name, spec in shown.items()}


def write_estimate() -> None:
    """Write ESTIMATE_FILE from the defaults and the price table (`make params`)."""
    ESTIMATE_FILE.write_text(defaults_estimate() + "\n")


if __name__ == "__main__":
    write_estimate()
