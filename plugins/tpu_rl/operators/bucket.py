"""The run's bucket: the provider's GCSCreateBucketOperator, under the run's limits."""

from __future__ import annotations

from airflow.providers.google.cloud.operators.gcs import GCSCreateBucketOperator

from tpu_rl.limits import RunLimited


class EnsureBucketOperator(RunLimited, GCSCreateBucketOperator):
    """Creates the bucket unless it exists."""
