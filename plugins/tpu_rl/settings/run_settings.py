"""The run's settings: one typed object, built from the DAG's Params or a JSON file."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpu_rl.settings import fields as setting_fields
from tpu_rl.settings.fields import OPTIONAL_SETTINGS, SETTING_FIELDS, json_type
from tpu_rl.settings.json_types import type_error


class SettingsError(ValueError):
    """Every problem found in a run's settings, reported at once."""

    def __init__(self, errors: list[str]):
        self.errors = errors
        super().__init__(
            f"{len(errors)} invalid setting(s):\n" + "\n".join(f"- {e}" for e in errors)
        )


def _frozen_dataclass(declared: type) -> type:
    """The frozen dataclass of a declared class, built on a copy of it: the declaration stays as
    written, so this module may run twice (Airflow's plugin loader runs every file under
    plugins/ once more, as a module of its own)."""
    namespace = {k: v for k, v in vars(declared).items() if k not in ("__dict__", "__weakref__")}
    namespace["__module__"] = __name__
    return dataclass(frozen=True)(type(declared.__name__, declared.__bases__, namespace))


# declared in tpu_rl.settings.fields, which the DAG file's parse reads without building this
RunSettings = _frozen_dataclass(setting_fields.RunSettings)

# Former Params that choose credentials: deployment configuration now (tpu_rl.deployment).
DEPLOYMENT_KEYS = {"hf_conn_id": "TPU_RL_HF_CONN_ID", "gcp_conn_id": "TPU_RL_GCP_CONN_ID"}


def load_settings(raw: Mapping[str, Any]) -> RunSettings:
    """Build and validate settings; raises SettingsError listing every problem."""
    from tpu_rl.settings.validation import validate

    errors = [
        f"{key}: set by the deployer ({DEPLOYMENT_KEYS[key]}), not by a run"
        if key in DEPLOYMENT_KEYS
        else f"{key}: unknown setting (known: see README's settings table)"
        for key in raw
        if key not in SETTING_FIELDS
    ]
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in SETTING_FIELDS:
            continue
        if value is None and key in OPTIONAL_SETTINGS:
            value = [] if json_type(SETTING_FIELDS[key]) == "array" else ""
        if problem := type_error(key, value, json_type(SETTING_FIELDS[key])):
            errors.append(problem)
            continue
        values[key] = float(value) if json_type(SETTING_FIELDS[key]) == "number" else value
    settings = RunSettings(**values)
    errors += validate(settings)
    if errors:
        raise SettingsError(errors)
    return settings


def load_settings_file(path: str | Path) -> RunSettings:
    """Settings from a JSON file with the Params' names."""
    try:
        raw = json.loads(Path(path).read_text())
    except ValueError as err:  # JSONDecodeError, or an integer past Python's digit limit
        raise SettingsError([f"{path}: not valid JSON ({err})"]) from err
    if not isinstance(raw, dict):
        raise SettingsError([f"{path}: must hold a JSON object of settings"])
    return load_settings(raw)
