"""A run in flight across the upgrade to deployment identities: its `validate`
recorded the settings alone. Its later tasks and its timeout callback say what it left and how
to remove it, instead of skipping as if the run had created nothing."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.support.old_record import OLD_RECORD, OLD_SLUG, RUN_ID
from tpu_rl.dag import runtime
from tpu_rl.run_record import (
    NoRunRecord,
    RecordedBeforeIdentities,
    recorded_deployment,
    run_record,
)
from tpu_rl.settings.run_settings import SettingsError


def context(record: object, task_id: str = "cleanup_kubernetes") -> dict:
    ti = SimpleNamespace(task_id=task_id, xcom_pull=lambda task_ids: record)
    return {"ti": ti, "run_id": RUN_ID}


def test_a_record_with_its_identity_gives_it():
    assert recorded_deployment(run_record(OLD_RECORD, "af-123"), RUN_ID) == "af-123"


def test_no_record_means_the_run_created_nothing():
    with pytest.raises(NoRunRecord):
        recorded_deployment(None, RUN_ID)
    with pytest.raises(SettingsError, match="nothing of this run can exist"):
        runtime.run_deployment(context(None))


def test_a_record_of_the_version_before_names_the_objects_and_how_to_remove_them():
    with pytest.raises(RecordedBeforeIdentities) as raised:
        runtime.run_deployment(context(OLD_RECORD))
    message = str(raised.value)
    assert not isinstance(raised.value, (NoRunRecord, SettingsError))  # not a skip: it fails
    assert f"-l tpu-rl.dev/run={OLD_SLUG}" in message and "-n default" in message
    assert f"gs://{OLD_RECORD['gcs_bucket']}/" in message
    assert OLD_RECORD["cluster_name"] in message
