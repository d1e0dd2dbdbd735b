"""What every task derives from its Airflow context: the run's settings and layout."""

from __future__ import annotations

from typing import Any

from tpu_rl.layout import RunLayout
from tpu_rl.settings.run_settings import load_settings


def layout_from_context(context: Any) -> RunLayout:
    """The run's layout from its Params and run id (validation errors raise SettingsError)."""
    return RunLayout(load_settings(dict(context["params"])), context["run_id"])
