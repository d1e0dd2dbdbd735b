"""The DAG's Params as data, generated from the settings' declaration: `params.json`, which the
DAG files' parse reads instead of importing the declaration.

Usage: python -m tpu_rl.settings.param_specs (`make params`); a test fails when the file is stale.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from tpu_rl.catalogue.cells import CELL_SETTINGS, CELLS
from tpu_rl.settings.choices import EVAL_METRICS
from tpu_rl.settings.fields import SETTING_FIELDS
from tpu_rl.settings.metadata import default_of, describe, json_type, plain
from tpu_rl.settings.params import SCHEMA_DIALECT, SPECS_FILE
from tpu_rl.settings.text_rules import MAX_LIST_ITEMS, text_keywords

# The catalogue's models and TPU types: the form offers them as it is typed in (`examples`).
CATALOGUE_EXAMPLES = {
    "model_name": list(dict.fromkeys(c.model_name for c in CELLS)),
    "tpu_type": list(dict.fromkeys(c.tpu_type for c in CELLS)),
}


def schema_keywords(f: dataclasses.Field[Any]) -> dict[str, Any]:
    """A setting's choices, catalogue examples, bounds, text rule and item type as JSON-schema
    keywords (a list's text rule applies to each item).

    The bounds sit inside `allOf`, never at the schema's top: Airflow's form gives a top-level
    `minimum`/`maximum` to its number input as `min`/`max` (the installed bundle
    airflow/ui/dist/assets/index-*.js, the number field: `max:o.schema.maximum??void 0,
    min:o.schema.minimum??void 0`), and Chakra's NumberInput clamps a value outside them when
    the field loses focus, so a 0 typed for training steps became 1 without a word. Inside
    `allOf` the form leaves the value as typed, and Airflow's trigger refuses the run before it
    exists: create_dagrun validates every Param's value against its schema with jsonschema
    (airflow/serialization/definitions/dag.py:664-665, definitions/param.py:59-67), and the
    API answers the ParamValidationError with a 400 (api_fastapi/core_api/routes/public/
    dag_run.py:800-801), which the form shows. `examples` gives a text field a datalist of
    suggestions (the bundle's text field: `list:s.schema.examples?`list_${e}`:void 0`), so a
    model or TPU outside the catalogue stays allowed, as validate allows it.
    """
    keywords: dict[str, Any] = {}
    if examples := CATALOGUE_EXAMPLES.get(f.name):
        keywords["examples"] = examples
    if (floor := f.metadata["at_least"]) is not None:
        keywords["allOf"] = [{"minimum": floor}]
    elif bounds := f.metadata["bounds"]:
        keywords["allOf"] = [{"minimum": bounds[0], "maximum": bounds[1]}]
    if choices := f.metadata["choices"]:
        # a setting the catalogue's cell gives starts empty (param_spec): null is one of its values
        empty = [None] if f.name in CELL_SETTINGS else []
        keywords["enum"] = [member.value for member in choices] + empty
    text = text_keywords(f.metadata["text"]) if f.metadata["text"] else {}
    if json_type(f) == "array":
        keywords["maxItems"] = MAX_LIST_ITEMS
        keywords["items"] = {"type": "string", **text}
    elif json_type(f) == "object":  # metric -> number (draft-07 propertyNames)
        keywords["propertyNames"] = {"enum": list(EVAL_METRICS)}
        keywords["additionalProperties"] = {"type": "number"}
    else:
        keywords.update(text)
    return keywords


def bounds_text(f: dataclasses.Field[Any]) -> str:
    """` From 1 to 10,000,000.` for a bounded integer setting, ` 0 or more.` for a number with a
    floor; empty otherwise."""
    if (floor := f.metadata["at_least"]) is not None:
        return f" {floor:g} or more."
    if not (bounds := f.metadata["bounds"]):
        return ""
    low, high = bounds
    return f" From {low:,} to {high:,}."


def cell_text(f: dataclasses.Field[Any]) -> str:
    """` Empty: the catalogue cell's (the tutorial's: 4x8).` for a setting a cell gives."""
    shown = json.dumps(plain(default_of(f))) if json_type(f) != "string" else default_of(f)
    return f" Empty: the catalogue cell's (the tutorial's: {shown or 'empty'})."


def param_spec(f: dataclasses.Field[Any]) -> dict[str, Any]:
    """One setting's Param: its default, and the JSON-schema keywords type, title, description,
    section, choices, bounds, text rule and item type.

    Only a required setting's type excludes null: Airflow's form marks a field required (the
    red star, and Trigger stays disabled while it is empty) exactly when its schema's type
    excludes null (the installed bundle airflow/ui/dist/assets/index-*.js: FieldRow's
    `required` is `!!schema.type && !(Array.isArray(schema.type) &&
    schema.type.includes("null"))`), and sends null for an emptied field, which
    load_settings reads as the setting's default (empty, for one that may be empty). Airflow's
    form files a Param under its own `section` only, so every Param carries one.

    A setting the catalogue's cell gives (the TPU shape, meshes, model repository) starts empty:
    Airflow merges every Param's default into a run's conf (airflow.sdk.definitions.param
    process_params), so a tutorial value there would be a value the run gave, and a run choosing
    another model or TPU type would keep the tutorial's topology and meshes; empty, the run's
    cell fills it (tpu_rl.settings.cell_defaults), the tutorial's for the defaults.
    """
    kind = json_type(f)
    from_cell = f.name in CELL_SETTINGS
    return {
        "default": None if from_cell else plain(default_of(f)),
        **SCHEMA_DIALECT,
        "type": kind if f.metadata["required"] else ["null", kind],
        "title": f.metadata["title"],
        "description": describe(f) + bounds_text(f) + (cell_text(f) if from_cell else ""),
        "section": f.metadata["section"].value,
        **schema_keywords(f),
    }


def param_specs() -> dict[str, dict[str, Any]]:
    """Every setting's Param, in declaration order."""
    return {name: param_spec(f) for name, f in SETTING_FIELDS.items()}


def write(path: Path = SPECS_FILE) -> None:
    path.write_text(json.dumps(param_specs(), indent=1) + "\n")


if __name__ == "__main__":
    write()
    print(f"wrote {SPECS_FILE}")
