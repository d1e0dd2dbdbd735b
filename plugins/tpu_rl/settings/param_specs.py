"""The DAG's Params as data, generated from the settings' declaration: `params.json`, which the
DAG file's parse reads instead of importing the declaration (regenerate: `make params`; a test
fails when the file and the settings differ)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tpu_rl.settings.fields import (
    OPTIONAL_SETTINGS,
    SETTING_FIELDS,
    default_of,
    describe,
    json_type,
)
from tpu_rl.settings.params import SCHEMA_DIALECT, SPECS_FILE

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


def param_spec(name: str, section: str) -> dict[str, Any]:
    """One setting's Param: its default, and the JSON-schema keywords type, title, description,
    section, bounds and choices.

    A setting that may be empty also accepts null: the form sends null for an emptied field
    and marks every field whose type excludes null as required.
    """
    f = SETTING_FIELDS[name]
    kind = json_type(f)
    return {
        "default": default_of(f),
        **SCHEMA_DIALECT,
        "type": ["null", kind] if name in OPTIONAL_SETTINGS else kind,
        "title": f.metadata["title"],
        "description": describe(f),
        "section": section,
        **f.metadata["schema"],
    }


def param_specs() -> dict[str, dict[str, Any]]:
    """Every setting's Param, in declaration order."""
    return {name: param_spec(name, section) for name, section in sections().items()}


def write(path: Path = SPECS_FILE) -> None:
    path.write_text(json.dumps(param_specs(), indent=1) + "\n")


if __name__ == "__main__":
    write()
    print(f"wrote {SPECS_FILE}")
