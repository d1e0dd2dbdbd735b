"""Cloud Storage's bucket settings and organisation policies, in front of gcp-storage-emulator.

A new bucket keeps the access, versioning and lifecycle settings its insert asked for (the
emulator drops them), with GCS's defaults otherwise (uniform access off, public access
prevention `inherited`). With `constraints/storage.uniformBucketLevelAccess` enforced, GCS
refuses a bucket without uniform access: HTTP 412 `Request violates constraint
'constraints/storage.uniformBucketLevelAccess'`, reason `conditionNotMet` (as quoted in
terraform-google-modules/terraform-google-vault#216); with
`constraints/storage.publicAccessPrevention` every new bucket has it enforced
(https://cloud.google.com/storage/docs/org-policy-constraints).
"""

from __future__ import annotations

from typing import Any

UNIFORM_ACCESS = "constraints/storage.uniformBucketLevelAccess"
PUBLIC_ACCESS_PREVENTION = "constraints/storage.publicAccessPrevention"
KEPT = ("versioning", "lifecycle", "labels")


def bucket_settings(request: dict[str, Any], constraints: set[str]) -> dict[str, Any]:
    """The settings a bucket created by this insert body has."""
    iam = request.get("iamConfiguration") or {}
    uniform = bool(
        (iam.get("uniformBucketLevelAccess") or iam.get("bucketPolicyOnly") or {}).get("enabled")
    )
    prevention = iam.get("publicAccessPrevention") or "inherited"
    if PUBLIC_ACCESS_PREVENTION in constraints:
        prevention = "enforced"
    kept = {key: request[key] for key in KEPT if key in request}
    return {
        **kept,
        "iamConfiguration": {
            "uniformBucketLevelAccess": {"enabled": uniform},
            "bucketPolicyOnly": {"enabled": uniform},
            "publicAccessPrevention": prevention,
        },
    }


def policy_violation(request: dict[str, Any], constraints: set[str]) -> str | None:
    """GCS's answer to a bucket insert an enforced constraint forbids, None when none does."""
    uniform = bucket_settings(request, constraints)["iamConfiguration"]["uniformBucketLevelAccess"]
    if UNIFORM_ACCESS in constraints and not uniform["enabled"]:
        return f"Request violates constraint '{UNIFORM_ACCESS}'"
    return None
