"""The catalogue's values for the settings a run leaves unset: its model's (Hugging Face
repository, tokenizer, chat template) and its cell's (TPU shape, machine type, meshes, vLLM
memory share, scan layers, image), tpu_rl.catalogue; and the check of a cell's overrides against
the settings' declaration.

The cell is the model's on the run's tpu_type; with no tpu_type given, the model's first cell.
A value the run gives (not absent, not null: an emptied form field, and the form's default) is
kept, and validation checks it. A setting of CELL_SETTINGS the cell does not set is the
setting's default (tpu_rl.settings.fields), the tutorial's cell's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tpu_rl.catalogue.cells import CELL_SETTINGS, SOURCE_SETTINGS, Cell, cells_of, find_cell
from tpu_rl.settings.fields import SETTING_FIELDS, RunSettings
from tpu_rl.settings.metadata import default_of, plain
from tpu_rl.settings.validation import setting_of, validate
from tpu_rl.tpu import generation_of


def _given(raw: Mapping[str, Any], name: str) -> Any:
    """The run's value of a setting, or its default when absent or null."""
    value = raw.get(name)
    return default_of(SETTING_FIELDS[name]) if value is None else value


def _default(name: str) -> Any:
    """A setting's default as JSON holds it (a choice as its plain value)."""
    return plain(default_of(SETTING_FIELDS[name]))


def cell_settings(cell: Cell) -> dict[str, Any]:
    """Every setting the cell gives, model_name first, then CELL_SETTINGS: the cell's own value,
    else the setting's default."""
    own = cell.settings()
    return {name: own.get(name, _default(name)) for name in ("model_name", *CELL_SETTINGS)}


def cell_defaults(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Values for the settings `raw` leaves unset, from the catalogue (nothing for a model or
    TPU type it does not know)."""
    model_name = _given(raw, "model_name")
    if raw.get("tpu_type") is None and (cells := cells_of(model_name)):
        values: dict[str, Any] = cell_settings(cells[0])
    elif cell := find_cell(model_name, _given(raw, "tpu_type")):
        values = cell_settings(cell)
    elif generation := generation_of(_given(raw, "tpu_type")):
        values = {"compute_type": generation.machine_type}
    else:
        values = {}
    return {name: value for name, value in values.items() if raw.get(name) is None}


def override_problem(name: str, value: Any) -> str | None:
    """What is wrong with one override by the settings' declaration, before its rules: a name
    that is no setting, or no setting a cell's source sets, or a value not of the setting's type
    (that of its default: a choice's plain value is a string)."""
    if name not in SETTING_FIELDS:
        return f"{name}: names no setting (tpu_rl.settings.fields)"
    if name not in SOURCE_SETTINGS:
        return (
            f"{name}: not a setting a cell sets (tpu_rl.catalogue.cells.SOURCE_SETTINGS; the "
            "trigger form gives a run every other setting, so a cell's value would never apply)"
        )
    expected = type(_default(name))
    if type(value) is not expected:
        return f"{name}: must be of type {expected.__name__}, got {value!r}"
    return None


def cell_problems(cell: Cell) -> list[str]:
    """Every problem of a cell's overrides: override_problem's, then what the settings' rules
    (validate) say of an override, on the cell's settings with the refused ones at their
    defaults."""
    where = f"{cell.model_name} on {cell.tpu_type}"
    refused = {
        name: p for name, value in cell.overrides.items() if (p := override_problem(name, value))
    }
    kept = {name: value for name, value in cell_settings(cell).items() if name not in refused}
    ruled = [
        problem
        for problem in validate(RunSettings(**kept))
        if setting_of(problem) in cell.overrides.keys() - refused.keys()
    ]
    return [f"{where}: {problem}" for problem in [*refused.values(), *ruled]]
