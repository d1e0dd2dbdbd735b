"""Each setting's Param as data, and the settings' defaults, read from `params.json`: generated
from the settings' declaration by tpu_rl.settings.param_specs, so the form and the code cannot
drift; the DAG files' parse reads this data, not the declaration (the run DAG's Params are
tpu_rl.dag.params)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

SPECS_FILE = Path(__file__).with_name("params.json")
# Airflow validates every Param at each task start, the schema against its dialect's metaschema
# first: draft-07's is the cheaper check than the default 2020-12's, and the schemas use no
# keyword newer than draft-07.
SCHEMA_DIALECT = {"$schema": "http://json-schema.org/draft-07/schema#"}


@functools.cache
def specs() -> dict[str, dict[str, Any]]:
    """Each setting's Param as data: its default and JSON-schema keywords (read once; never
    changed: each Param gets its own top-level schema)."""
    loaded: dict[str, dict[str, Any]] = json.loads(SPECS_FILE.read_text())
    return loaded


def default_settings() -> Any:
    """The settings' defaults as attributes, as RunSettings() has them (choices as plain
    strings), read from params.json."""
    return SimpleNamespace(**{name: spec["default"] for name, spec in specs().items()})
