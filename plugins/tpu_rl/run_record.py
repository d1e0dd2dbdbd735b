"""What `validate` records for the rest of its run: the settings, and the deployment identity
the run started with (every later task, the cleanups and the timeout callback read it from
there, so a change of the deployment's setting mid-run cannot orphan the run's objects)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from tpu_rl.names import Step

SETTINGS_TASK = Step.VALIDATE
DEPLOYMENT_KEY = "deployment_id"


class NoRunRecord(LookupError):
    """`validate` has not recorded the run's settings and identity: the run created nothing."""


class UnreadableRunRecord(LookupError):
    """`validate` recorded something this version cannot read as the run's identity."""


class RecordedBeforeIdentities(LookupError):
    """The run started on a version before deployment identities: `validate` recorded its
    settings alone, and its objects carry that version's names, which this one does not derive."""

    def __init__(self, run_id: str, record: Mapping[str, Any]) -> None:
        # that version's run slug (layout.run_slug before deployment identities): 10 hex of the
        # run id's hash
        slug = "rl-" + hashlib.sha256(run_id.encode()).hexdigest()[:10]
        namespace = record.get("namespace", "default")
        super().__init__(
            f"run {run_id} started before this version (no deployment identity recorded): its "
            f"objects are named {slug}; remove them with `kubectl delete jobs,jobsets,secrets "
            f"-n {namespace} -l tpu-rl.dev/run={slug}`, its GCS folders are under "
            f"gs://{record.get('gcs_bucket', '<bucket>')}/ with {slug} in their path, and a "
            f"cluster it created ({record.get('cluster_name', '?')}) goes with `gcluster destroy`"
        )


def run_record(settings: Mapping[str, Any], deployment: str) -> dict[str, Any]:
    """What `validate` returns: the settings beside the run's deployment identity."""
    return {**settings, DEPLOYMENT_KEY: deployment}


def recorded_settings(record: Any) -> dict[str, Any]:
    """The settings of a record (without the identity, which is not a setting)."""
    if not isinstance(record, Mapping):
        raise NoRunRecord(f"{SETTINGS_TASK} has not recorded the run's settings")
    return {k: v for k, v in record.items() if k != DEPLOYMENT_KEY}


def recorded_deployment(record: Any, run_id: str) -> str:
    """The deployment identity a run started with, from its record (RecordedBeforeIdentities:
    settings recorded by an older version, without one; UnreadableRunRecord: not a name)."""
    if not isinstance(record, Mapping):
        raise NoRunRecord(f"{SETTINGS_TASK} has not recorded the run's deployment identity")
    if not (identity := record.get(DEPLOYMENT_KEY)):
        raise RecordedBeforeIdentities(run_id, record)
    if not isinstance(identity, str):  # str() of it would name objects the run never made
        raise UnreadableRunRecord(
            f"{SETTINGS_TASK} recorded the deployment identity {identity!r}, not a name"
        )
    return identity
