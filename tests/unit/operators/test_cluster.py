"""tpu_rl.operators.cluster: which cluster command each step runs and when it must leave the
cluster alone, the calendar window a deploy waits for, and the run's bucket's defaults (the
commands run against Cluster Toolkit's fake: tests/integration/test_cluster_toolkit.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from google.api_core.exceptions import Forbidden

from tpu_rl.operators import RUN_CLUSTER
from tpu_rl.operators.cluster import (
    CreateClusterOperator,
    DestroyClusterOperator,
    EnsureBucketOperator,
)
from tpu_rl.preflight import calendar_reservation
from tpu_rl.settings.run_settings import RunSettings

STEPS = SimpleNamespace(create=["gcluster", "create"], deploy=["gcluster", "deploy"], destroy=["d"])


def test_create_deploys_and_cleanup_rebuilds_the_folder_then_destroys():
    assert CreateClusterOperator().commands(STEPS) == [STEPS.deploy]
    assert DestroyClusterOperator().commands(STEPS) == [STEPS.create, STEPS.destroy]


@pytest.mark.parametrize(
    ("settings", "create", "destroy"),
    [
        ({}, None, None),
        ({"cluster_mode": "existing"}, "cluster_mode=existing", "cluster_mode=existing"),
        ({"keep_cluster": True}, None, "keep_cluster is set"),
    ],
)
def test_a_cluster_not_the_runs_or_kept_is_left_alone(settings, create, destroy):
    s = RunSettings(**settings)
    for step, reason in ((CreateClusterOperator(), create), (DestroyClusterOperator(), destroy)):
        found = step.skip_reason(s)
        assert (found is None) if reason is None else found.startswith(reason)


def test_the_deploy_waits_for_a_calendar_window_still_to_come(tutorial_conf, monkeypatch):
    conf = {**tutorial_conf, "capacity": "calendar", "reservation": "v6e-cal"}
    step = CreateClusterOperator(settings=conf)
    start = datetime(2099, 1, 1, tzinfo=UTC)
    window = calendar_reservation.Window("v6e-cal", start.timestamp(), start.timestamp() + 3600)
    monkeypatch.setattr(calendar_reservation, "calendar_window", lambda s, conn: window)
    assert step.window_opens({}) == start
    opened = calendar_reservation.Window("v6e-cal", 0.0, start.timestamp())
    monkeypatch.setattr(calendar_reservation, "calendar_window", lambda s, conn: opened)
    assert step.window_opens({}) is None


def test_invalid_or_existing_settings_wait_for_no_window(tutorial_conf, monkeypatch):
    monkeypatch.setattr(calendar_reservation, "calendar_window", lambda s, c: pytest.fail("read"))
    assert CreateClusterOperator(settings={"num_batches": -1}).window_opens({}) is None
    existing = {**tutorial_conf, "cluster_mode": "existing"}
    assert CreateClusterOperator(settings=existing).window_opens({}) is None


def test_the_bucket_is_the_runs_in_its_region_and_standard():
    step = EnsureBucketOperator()
    assert (step.bucket_name, step.location, step.project_id) == (
        "{{ params.gcs_bucket }}",
        RUN_CLUSTER["location"],
        RUN_CLUSTER["project_id"],
    )
    assert step.storage_class == "STANDARD"


def bucket_hook(monkeypatch: pytest.MonkeyPatch, get_bucket) -> None:
    client = SimpleNamespace(get_bucket=get_bucket)
    monkeypatch.setattr(
        "airflow.providers.google.cloud.hooks.gcs.GCSHook.__init__", lambda self, **kw: None
    )
    monkeypatch.setattr(
        "airflow.providers.google.cloud.hooks.gcs.GCSHook.get_conn", lambda self: client
    )


def test_an_existing_bucket_without_protections_is_warned_of_each(monkeypatch, capsys):
    """An operator logs through Airflow's structlog, which prints to stdout."""
    iam = SimpleNamespace(
        uniform_bucket_level_access_enabled=True, public_access_prevention="inherited"
    )
    found = SimpleNamespace(name="b", iam_configuration=iam, versioning_enabled=True)
    bucket_hook(monkeypatch, lambda name: found)
    step = EnsureBucketOperator(bucket_name="b")
    step.warn_of_missing_protections()
    [warning] = [line for line in capsys.readouterr().out.splitlines() if "Existing bucket" in line]
    assert "Existing bucket b: public access prevention is not enforced" in warning
    assert "uniform bucket-level access" not in warning and "versioning" not in warning


def test_a_bucket_whose_settings_cannot_be_read_is_a_warning_not_a_failure(monkeypatch, capsys):
    def forbidden(name: str) -> None:
        raise Forbidden("storage.buckets.get denied")

    bucket_hook(monkeypatch, forbidden)
    EnsureBucketOperator(bucket_name="b").warn_of_missing_protections()
    assert "Cannot read bucket b's settings: 403" in capsys.readouterr().out
