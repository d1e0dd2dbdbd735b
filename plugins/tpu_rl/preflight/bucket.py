"""The run's bucket, if it exists: in the run's region, with uniform bucket-level access and
public access prevention (tpu_rl.bucket says why); read through the provider's GCSHook.

A missing bucket passes: ensure_bucket creates it in the region with those settings. A bucket
in another location fails (every checkpoint read and write crosses regions). An existing bucket
without the protections passes with a warning and the commands that add them: a run uses such
a bucket as it is, with ensure_bucket's warning, and preflight does not block what a
run accepts.
"""

from __future__ import annotations

from airflow.providers.google.cloud.hooks.gcs import GCSHook

from tpu_rl.bucket import missing_protections
from tpu_rl.preflight.result import CheckResult, failed, passed
from tpu_rl.settings.fields import RunSettings

LOCATION, POLICY = "bucket location", "bucket policy"


def check_bucket(s: RunSettings, gcp_conn_id: str) -> list[CheckResult]:
    """Where the bucket is and how it is protected (buckets.get)."""
    name = f"gs://{s.gcs_bucket}"
    bucket = GCSHook(gcp_conn_id=gcp_conn_id).get_conn().lookup_bucket(s.gcs_bucket)
    if bucket is None:
        created = f"{name} does not exist yet: ensure_bucket creates it in {s.region}"
        return [passed(LOCATION, created), passed(POLICY, f"{created}, with uniform access")]
    location = str(bucket.location or "").lower()
    results = [
        passed(LOCATION, f"{name} is in {location}")
        if location == s.region
        else failed(
            LOCATION,
            f"{name} is in {location or 'an unknown location'} ({bucket.location_type}), not "
            f"{s.region}: every checkpoint read and write would cross regions (and be billed)",
            f"name a bucket in {s.region} (gcloud storage buckets create gs://<name> "
            f"--location={s.region} --uniform-bucket-level-access --public-access-prevention)",
        )
    ]
    missing = missing_protections(bucket)
    if missing:
        results.append(passed(POLICY, f"{name} is used as it is; warning: {'; '.join(missing)}"))
    else:
        results.append(
            passed(POLICY, f"{name}: uniform access, public access prevention, versioning")
        )
    return results
