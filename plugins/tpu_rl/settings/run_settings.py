"""Loading the run's settings: one RunSettings from the DAG's Params or a JSON file, each value
checked for its JSON type, then validated; every problem reported at once."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tpu_rl.settings.cell_defaults import cell_defaults
from tpu_rl.settings.fields import (
    OPTIONAL_SETTINGS,
    REQUIRED_SETTINGS,
    SETTING_FIELDS,
    RunSettings,
)
from tpu_rl.settings.metadata import json_type
from tpu_rl.settings.text_rules import short_repr
from tpu_rl.settings.validation import CLUSTER_RULES, Rule, validate

# Former Params that choose credentials: deployment configuration now (tpu_rl.deployment).
DEPLOYMENT_KEYS = {"hf_conn_id": "TPU_RL_HF_CONN_ID", "gcp_conn_id": "TPU_RL_GCP_CONN_ID"}


class SettingsError(ValueError):
    """Every problem found in a run's settings, reported at once."""

    def __init__(self, errors: list[str]):
        self.errors = errors
        super().__init__(
            f"{len(errors)} invalid setting(s):\n" + "\n".join(f"- {e}" for e in errors)
        )


def type_error(name: str, value: Any, expected: str) -> str | None:
    """A message when `value` is not of the JSON type `expected` for setting `name`."""
    ok = {
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float)
        and not isinstance(value, bool)
        and (isinstance(value, float) or abs(value) < 2**1023),  # float() would overflow
        "boolean": isinstance(value, bool),
        "array": isinstance(value, list) and all(isinstance(v, str) for v in value),
        "object": isinstance(value, dict)
        and all(type_error("", v, "number") is None for v in value.values()),
    }[expected]
    if ok:
        return None
    shown = {
        "array": "a list of strings",
        "integer": "an integer",
        "object": "an object of numbers",
    }.get(expected, f"a {expected}")
    return f"{name}: must be {shown}, got {short_repr(value)}"


def unknown_key(key: str) -> str:
    """The message for a key that names no setting, with the closest setting's name if one is
    close enough."""
    shown = key if key.isidentifier() and len(key) <= 64 else short_repr(key)
    close = difflib.get_close_matches(key[:64], SETTING_FIELDS, n=1)
    hint = f"did you mean {close[0]}?" if close else "known: see docs/settings.md"
    return f"{shown}: unknown setting ({hint})"


def load_settings(raw: Mapping[str, Any]) -> RunSettings:
    """Build and validate settings, those left unset from the catalogue's cell
    (tpu_rl.settings.cell_defaults); raises SettingsError listing every problem."""
    settings, errors = read_settings(raw)
    if errors:
        raise SettingsError(errors)
    return settings


def load_cluster_settings(raw: Mapping[str, Any]) -> RunSettings:
    """A cluster's settings for a Cluster Toolkit step given them (the janitor's destroy),
    checked by the rules of what the step reads (validation.CLUSTER_RULES); raises
    SettingsError listing every problem."""
    settings, errors = read_settings(raw, CLUSTER_RULES)
    if errors:
        raise SettingsError(errors)
    return settings


def read_settings(
    raw: Mapping[str, Any], rules: tuple[Rule, ...] | None = None
) -> tuple[RunSettings, list[str]]:
    """The settings `raw` gives (those left unset from the catalogue's cell) and every problem
    of them: unknown keys, values of the wrong JSON type (such a value stays at its default in
    the settings returned), then validate's (by `rules`, all by default). The estimate page
    reads both (tpu_rl.ui.estimate)."""
    errors = [
        f"{key}: set by the deployer ({DEPLOYMENT_KEYS[key]}), not by a run"
        if key in DEPLOYMENT_KEYS
        else unknown_key(key)
        for key in raw
        if key not in SETTING_FIELDS
    ]
    values: dict[str, Any] = {}
    for key, value in {**raw, **cell_defaults(raw)}.items():
        if key not in SETTING_FIELDS:
            continue
        kind = json_type(SETTING_FIELDS[key])
        if value is None and key not in REQUIRED_SETTINGS:  # an emptied field of the form
            if key not in OPTIONAL_SETTINGS:
                continue  # the setting's default
            value = {"array": [], "object": {}}.get(kind, "")
        if problem := type_error(key, value, kind):
            errors.append(problem)
            continue
        if kind == "object":
            value = {name: float(v) for name, v in value.items()}
        values[key] = float(value) if kind == "number" else value
    settings = RunSettings(**values)
    return settings, errors + validate(settings, rules)


def load_settings_file(path: str | Path) -> RunSettings:
    """Settings from a JSON file with the Params' names."""
    try:
        raw = json.loads(Path(path).read_text())
    except ValueError as err:  # JSONDecodeError, or an integer past Python's digit limit
        raise SettingsError([f"{path}: not valid JSON ({err})"]) from err
    if not isinstance(raw, dict):
        raise SettingsError([f"{path}: must hold a JSON object of settings"])
    return load_settings(raw)
