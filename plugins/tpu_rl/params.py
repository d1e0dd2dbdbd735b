"""The DAG's Params, generated from the settings so the UI form and the code cannot drift."""

from __future__ import annotations

from typing import Any

from airflow.sdk import Param

from tpu_rl.setting_fields import (
    OPTIONAL_SETTINGS,
    SETTING_FIELDS,
    default_of,
    describe,
    json_type,
)

# The form's sections, each starting at the named setting (settings are declared in this order).
# Airflow's form files a Param under its own `section` only, so every Param carries one.
SECTION_STARTS = {
    "project": "Google Cloud",
    "model_name": "Model",
    "data_template_path": "GRPO",
    "backend_restarts": "Run control",
}


def sections() -> dict[str, str]:
    """Each setting's section in the trigger form."""
    found, current = {}, ""
    for name in SETTING_FIELDS:
        current = SECTION_STARTS.get(name, current)
        found[name] = current
    return found


SECTIONS = sections()
# Airflow validates every Param at each task start, the schema against its dialect's metaschema
# first: draft-07's takes a quarter of the default 2020-12's time (about 30 ms per worker call
# for 67 Params). The schemas use no keyword newer than draft-07.
SCHEMA_DIALECT = {"$schema": "http://json-schema.org/draft-07/schema#"}


def param_schema(name: str) -> dict[str, Any]:
    """JSON-schema keywords of one setting: type, title, description, section, bounds, choices.

    A setting that may be empty also accepts null: the form sends null for an emptied field
    and marks every field whose type excludes null as required.
    """
    f = SETTING_FIELDS[name]
    kind = json_type(f)
    return {
        **SCHEMA_DIALECT,
        "type": ["null", kind] if name in OPTIONAL_SETTINGS else kind,
        "title": f.metadata["title"],
        "description": describe(f),
        "section": SECTIONS[name],
        **f.metadata["schema"],
    }


def dag_params() -> dict[str, Param]:
    """One Param per setting, defaulting to the tutorial's value.

    Set them last, on the DAG alone: a task made while the DAG has Params keeps a deep copy,
    which Airflow's serializer validates Param by Param (jsonschema) on every parse; at run
    time the DAG's are merged in anyway (airflow.sdk.definitions.param.process_params).
    """
    params = {}
    for name, f in SETTING_FIELDS.items():
        params[name] = Param(default_of(f), **param_schema(name))
    return params
