"""What `validate` records for the rest of its run: the settings, and the deployment identity
the run started with (every later task, the cleanups and the timeout callback read it from
there, so a change of the deployment's setting mid-run cannot orphan the run's objects)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tpu_rl.names import Step

SETTINGS_TASK = Step.VALIDATE
DEPLOYMENT_KEY = "deployment_id"


class NoRunRecord(LookupError):
    """`validate` has not recorded the run's settings and identity: the run created nothing."""


def run_record(settings: Mapping[str, Any], deployment: str) -> dict[str, Any]:
    """What `validate` returns: the settings beside the run's deployment identity."""
    return {**settings, DEPLOYMENT_KEY: deployment}


def recorded_settings(record: Any) -> dict[str, Any]:
    """The settings of a record (without the identity, which is not a setting)."""
    if not isinstance(record, Mapping):
        raise NoRunRecord(f"{SETTINGS_TASK} has not recorded the run's settings")
    return {k: v for k, v in record.items() if k != DEPLOYMENT_KEY}


def recorded_deployment(record: Any) -> str:
    """The deployment identity a run started with, from its record."""
    identity = record.get(DEPLOYMENT_KEY) if isinstance(record, Mapping) else None
    if not identity:
        raise NoRunRecord(f"{SETTINGS_TASK} has not recorded the run's deployment identity")
    return str(identity)
