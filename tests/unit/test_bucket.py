"""The run's bucket protections (tpu_rl.bucket): what an existing bucket lacks, each with the
gcloud command that adds it."""

from __future__ import annotations

from types import SimpleNamespace

from tpu_rl.bucket import BUCKET_RESOURCE, NONCURRENT_DAYS, missing_protections


def bucket(*, uniform: bool = True, prevention: str = "enforced", versioning: bool = True):
    """A loaded google.cloud.storage Bucket's fields that missing_protections reads."""
    iam = SimpleNamespace(
        uniform_bucket_level_access_enabled=uniform, public_access_prevention=prevention
    )
    return SimpleNamespace(name="b", iam_configuration=iam, versioning_enabled=versioning)


def test_a_bucket_with_every_protection_lacks_nothing():
    assert missing_protections(bucket()) == []


def test_each_missing_protection_is_named_with_its_command():
    missing = missing_protections(bucket(uniform=False, prevention="inherited", versioning=False))
    assert len(missing) == 3
    uniform, prevention, versioning = missing
    assert uniform.endswith("gcloud storage buckets update gs://b --uniform-bucket-level-access")
    assert "gs://b --public-access-prevention" in prevention
    assert "gs://b --versioning" in versioning


def test_only_what_is_missing_is_named():
    assert missing_protections(bucket(versioning=False)) == [
        "object versioning is off (an overwritten or deleted Terraform state cannot be "
        "recovered): gcloud storage buckets update gs://b --versioning, with a lifecycle rule "
        "deleting noncurrent versions"
    ]


def test_a_new_bucket_has_every_protection_and_drops_noncurrent_versions():
    iam = BUCKET_RESOURCE["iamConfiguration"]
    assert iam["uniformBucketLevelAccess"] == {"enabled": True}
    assert iam["publicAccessPrevention"] == "enforced"
    assert BUCKET_RESOURCE["versioning"] == {"enabled": True}
    (rule,) = BUCKET_RESOURCE["lifecycle"]["rule"]
    assert rule == {
        "action": {"type": "Delete"},
        "condition": {"daysSinceNoncurrentTime": NONCURRENT_DAYS},
    }
