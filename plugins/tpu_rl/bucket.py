"""The run's bucket as an organisation runs it: created with uniform bucket-level access, public
access prevention and object versioning, and what an existing bucket lacks of them.

The bucket also holds gcluster's Terraform state; Cluster Toolkit's instructions for that state
bucket create it with `--uniform-bucket-level-access` and turn on `--versioning`
(GoogleCloudPlatform/cluster-toolkit,
examples/gke-consumption-options/dws-flex-start-queued-provisioning/gke-tpu-v6e/README.md).
Organisations enforcing `constraints/storage.uniformBucketLevelAccess` refuse a bucket without
uniform access (HTTP 412 "Request violates constraint ...", conditionNotMet).
"""

from __future__ import annotations

from typing import Any

# Noncurrent versions are deleted this long after a newer one replaced them: the Terraform
# state can be rolled back for a week, and the checkpoints MaxText deletes past
# max_num_checkpoints_to_keep stop billing then (versioning alone keeps them forever).
NONCURRENT_DAYS = 7

# Fields of the JSON API's buckets.insert body
# (https://cloud.google.com/storage/docs/json_api/v1/buckets/insert; lifecycle conditions:
# https://cloud.google.com/storage/docs/lifecycle#daysSinceNoncurrentTime), given to the
# provider's GCSHook.create_bucket as `resource` (it patches each into the new bucket).
BUCKET_RESOURCE: dict[str, Any] = {
    "iamConfiguration": {
        "uniformBucketLevelAccess": {"enabled": True},
        "publicAccessPrevention": "enforced",
    },
    "versioning": {"enabled": True},
    "lifecycle": {
        "rule": [
            {
                "action": {"type": "Delete"},
                "condition": {"daysSinceNoncurrentTime": NONCURRENT_DAYS},
            }
        ]
    },
}


def missing_protections(bucket: Any) -> list[str]:
    """What a google.cloud.storage Bucket (loaded) lacks of the run's protections, each with the
    gcloud command that adds it."""
    name = f"gs://{bucket.name}"
    iam = bucket.iam_configuration
    missing = []
    if not iam.uniform_bucket_level_access_enabled:
        missing.append(
            "uniform bucket-level access is off (object ACLs decide access; organisations "
            "enforcing constraints/storage.uniformBucketLevelAccess refuse such buckets): "
            f"gcloud storage buckets update {name} --uniform-bucket-level-access"
        )
    if iam.public_access_prevention != "enforced":
        missing.append(
            "public access prevention is not enforced (an ACL or IAM grant could publish the "
            f"checkpoints): gcloud storage buckets update {name} --public-access-prevention"
        )
    if not bucket.versioning_enabled:
        missing.append(
            "object versioning is off (an overwritten or deleted Terraform state cannot be "
            f"recovered): gcloud storage buckets update {name} --versioning, with a lifecycle "
            "rule deleting noncurrent versions"
        )
    return missing
