"""The DAG's Params, read from `params.json` (generated from the settings by
tpu_rl.settings.param_specs, so the UI form and the code cannot drift): the parse reads data, not
the
settings' declaration."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from airflow.sdk import Param

SPECS_FILE = Path(__file__).with_name("params.json")
# Airflow validates every Param at each task start, the schema against its dialect's metaschema
# first: draft-07's takes a quarter of the default 2020-12's time (about 30 ms per worker call
# for 67 Params). The schemas use no keyword newer than draft-07.
SCHEMA_DIALECT = {"$schema": "http://json-schema.org/draft-07/schema#"}


@functools.cache
def specs() -> dict[str, dict[str, Any]]:
    """Each setting's Param as data: its default and JSON-schema keywords (read once; never
    changed: each Param gets its own top-level schema)."""
    return json.loads(SPECS_FILE.read_text())


def default_settings() -> Any:
    """The settings' defaults as attributes, as RunSettings() has them, without building it."""
    return SimpleNamespace(**{name: spec["default"] for name, spec in specs().items()})


def dag_params() -> dict[str, Param]:
    """One Param per setting, defaulting to the tutorial's value.

    Set them last, on the DAG alone: a task made while the DAG has Params keeps a deep copy,
    which Airflow's serializer validates Param by Param (jsonschema) on every parse; at run
    time the DAG's are merged in anyway (airflow.sdk.definitions.param.process_params).
    """
    return {name: Param(**spec) for name, spec in specs().items()}
