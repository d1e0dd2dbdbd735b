"""tpu_rl.preflight.bucket: the run's bucket, if it exists, is in the run's region; one without
the protections passes with the commands that add them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tpu_rl.preflight.bucket import LOCATION, POLICY, check_bucket
from tpu_rl.settings.run_settings import load_settings


@pytest.fixture
def buckets(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The project's buckets by name, as GCSHook's client looks them up."""
    found: dict[str, Any] = {}
    client = SimpleNamespace(lookup_bucket=found.get)
    monkeypatch.setattr(
        "airflow.providers.google.cloud.hooks.gcs.GCSHook.__init__", lambda self, **kw: None
    )
    monkeypatch.setattr(
        "airflow.providers.google.cloud.hooks.gcs.GCSHook.get_conn", lambda self: client
    )
    return found


def bucket(name: str, location: str, protected: bool = True) -> SimpleNamespace:
    iam = SimpleNamespace(
        uniform_bucket_level_access_enabled=protected,
        public_access_prevention="enforced" if protected else "inherited",
    )
    return SimpleNamespace(
        name=name,
        location=location,
        location_type="region",
        iam_configuration=iam,
        versioning_enabled=protected,
    )


def test_a_missing_bucket_passes_ensure_bucket_creates_it(tutorial_conf, buckets):
    s = load_settings(tutorial_conf)
    results = check_bucket(s, "gcp")
    assert [(r.name, r.passed) for r in results] == [(LOCATION, True), (POLICY, True)]
    assert f"ensure_bucket creates it in {s.region}" in results[0].evidence


def test_a_bucket_in_another_region_fails_naming_both(tutorial_conf, buckets):
    s = load_settings(tutorial_conf)
    buckets[s.gcs_bucket] = bucket(s.gcs_bucket, "EUROPE-WEST4")
    location, policy = check_bucket(s, "gcp")
    assert (
        not location.passed and f"is in europe-west4 (region), not {s.region}" in location.evidence
    )
    assert f"--location={s.region}" in location.fix and policy.passed


def test_an_unprotected_bucket_in_the_region_passes_with_the_commands(tutorial_conf, buckets):
    s = load_settings(tutorial_conf)
    buckets[s.gcs_bucket] = bucket(s.gcs_bucket, s.region.upper(), protected=False)
    location, policy = check_bucket(s, "gcp")
    assert location.passed and policy.passed
    assert "is used as it is; warning: uniform bucket-level access is off" in policy.evidence
    assert "--public-access-prevention" in policy.evidence and "--versioning" in policy.evidence
