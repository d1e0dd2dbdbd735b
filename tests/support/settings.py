"""The errors load_settings finds in a run's settings."""

from __future__ import annotations

from tpu_rl.settings.run_settings import SettingsError, load_settings


def errors_for(conf: dict, **overrides) -> list[str]:
    """The errors of `conf` with `overrides` (none: it loads)."""
    try:
        load_settings({**conf, **overrides})
    except SettingsError as err:
        return err.errors
    return []
