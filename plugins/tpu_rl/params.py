"""The DAG's Params, generated from the settings so the UI form and the code cannot drift."""

from __future__ import annotations

from typing import Any

from airflow.sdk import Param

from tpu_rl.settings import SETTING_FIELDS, json_type

SECTION_BREAKS = {"project": "Google Cloud", "model_name": "Model", "data_template_path": "GRPO"}


def param_schema(name: str) -> dict[str, Any]:
    """JSON-schema keywords of one setting: type, title, description, bounds, choices."""
    f = SETTING_FIELDS[name]
    schema: dict[str, Any] = {
        "type": json_type(f),
        "title": f.metadata["title"],
        "description": f.metadata["description"],
        **f.metadata["schema"],
    }
    if name in SECTION_BREAKS:
        schema["section"] = SECTION_BREAKS[name]
    return schema


def dag_params() -> dict[str, Param]:
    """One Param per setting, defaulting to the tutorial's value."""
    params = {}
    for name, f in SETTING_FIELDS.items():
        default = f.default_factory() if callable(f.default_factory) else f.default
        params[name] = Param(default, **param_schema(name))
    return params
