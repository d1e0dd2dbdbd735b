"""The catalogue's values for the settings a run leaves unset: its model's (Hugging Face
repository, tokenizer, chat template) and its cell's (TPU shape, machine type, meshes, vLLM
memory share, scan layers, image), tpu_rl.catalogue.

The cell is the model's on the run's tpu_type; with no tpu_type given, the model's first cell.
A value the run gives (not absent, not null: an emptied form field, and the form's default) is
kept, and validation checks it; the dataclass's defaults are the tutorial's cell's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tpu_rl.catalogue.cells import cells_of, find_cell
from tpu_rl.settings.fields import SETTING_FIELDS
from tpu_rl.settings.metadata import default_of
from tpu_rl.tpu import generation_of


def _given(raw: Mapping[str, Any], name: str) -> Any:
    """The run's value of a setting, or its default when absent or null."""
    value = raw.get(name)
    return default_of(SETTING_FIELDS[name]) if value is None else value


def cell_defaults(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Values for the settings `raw` leaves unset, from the catalogue (nothing for a model or
    TPU type it does not know)."""
    model_name = _given(raw, "model_name")
    if raw.get("tpu_type") is None and (cells := cells_of(model_name)):
        values: dict[str, Any] = cells[0].settings()
    elif cell := find_cell(model_name, _given(raw, "tpu_type")):
        values = cell.settings()
    elif generation := generation_of(_given(raw, "tpu_type")):
        values = {"compute_type": generation.machine_type}
    else:
        values = {}
    return {name: value for name, value in values.items() if raw.get(name) is None}
