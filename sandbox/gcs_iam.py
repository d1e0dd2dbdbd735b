"""Cloud Storage's checks in front of gcp-storage-emulator: who may do what, and bucket classes.

A caller presents `Authorization: Bearer sandbox-identity:<principal>` (what a simulated pod's
metadata server would give it); any other caller is the product's own Google credentials,
the project owner. A principal without a role granting the permission gets GCS's 403.
Bucket creation refuses location / storage-class combinations Cloud Storage refuses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from sandbox.gcs_policy import policy_violation

TOKEN_PREFIX = "sandbox-identity:"
ROLE_PERMISSIONS = {
    "storage.admin": {"*"},
    "storage.objectAdmin": {"storage.objects.*"},
    "storage.objectUser": {"storage.objects.*"},
    "storage.objectViewer": {"storage.objects.get", "storage.objects.list"},
    "storage.objectCreator": {"storage.objects.create"},
    "owner": {"*"},
    "editor": {"*"},
}
MULTI_REGIONS = {"US", "EU", "ASIA"}
DUAL_REGIONS = {"NAM4", "EUR4", "ASIA1", "EUR5", "EUR7", "EUR8"}
ANYWHERE_CLASSES = {"STANDARD", "NEARLINE", "COLDLINE", "ARCHIVE"}
BAD_COMBINATION = (
    "The combination of locationConstraint and storageClass you provided is not supported for "
    "your project"
)
_OBJECT = re.compile(r"^(?:/download|/upload)?(?:/storage/v1)?/b/([^/]+)/o(?:/(.+))?$")
_BUCKET = re.compile(r"^(?:/storage/v1)?/b(?:/([^/]+))?$")
_BUCKET_IAM = re.compile(r"^(?:/storage/v1)?/b/([^/]+)/iam$")
# objects.rewrite and objects.copy: POST <source object>/rewriteTo|copyTo/b/<bucket>/o/<object>
_TO_DESTINATION = re.compile(r"/(?:rewriteTo|copyTo)(/b/[^/]+/o/.+)$")

RolesOf = Callable[[str], set[str]]


def permission(method: str, path: str) -> tuple[str, str] | None:
    """(permission, what it is on: 'object' or 'bucket') for a JSON API request."""
    path = urlsplit(path).path
    if m := _OBJECT.match(path):
        if m.group(2) is None:
            return (
                ("storage.objects.create", "object")
                if method == "POST"
                else ("storage.objects.list", "bucket")
            )
        verb = {"GET": "get", "DELETE": "delete", "PATCH": "update", "PUT": "create"}
        return f"storage.objects.{verb.get(method, 'get')}", "object"
    if m := _BUCKET.match(path):
        if m.group(1) is None:
            return (
                "storage.buckets.create" if method == "POST" else "storage.buckets.list"
            ), "bucket"
        return {"GET": "storage.buckets.get", "DELETE": "storage.buckets.delete"}.get(
            method, "storage.buckets.update"
        ), "bucket"
    return None


def permissions(method: str, path: str) -> list[tuple[str, str, str]]:
    """Each (permission, what it is on, the path it is checked on) a JSON API request needs: a
    rewrite or copy needs storage.objects.get on its source and storage.objects.create on its
    destination (https://cloud.google.com/storage/docs/json_api/v1/objects/rewrite,
    "Authorization": storage.objects.create and storage.objects.get, with the destination's
    storage.objects.delete when it replaces an object)."""
    wanted = permission(method, path)
    if wanted is None:
        return []
    found = [(*wanted, path)]
    if method == "POST" and (to := _TO_DESTINATION.search(urlsplit(path).path)):
        found.append(("storage.objects.create", "object", "/storage/v1" + to.group(1)))
    return found


def bucket_of(path: str) -> str:
    """The bucket a JSON API path is on ('' for none)."""
    path = urlsplit(path).path
    m = _OBJECT.match(path) or _BUCKET.match(path)
    return (m.group(1) or "") if m else ""


def allowed(roles: set[str], wanted: str) -> bool:
    for role in roles:
        for granted in ROLE_PERMISSIONS.get(role.removeprefix("roles/"), set()):
            if granted == "*" or granted == wanted:
                return True
            if granted.endswith(".*") and wanted.startswith(granted[:-1]):
                return True
    return False


def location_class_error(body: dict[str, Any]) -> str | None:
    """GCS's answer to a bucket's location and storage class, None when it accepts them."""
    location = str(body.get("location") or "US").upper()
    storage_class = str(body.get("storageClass") or "STANDARD").upper()
    multi = location in MULTI_REGIONS or location in DUAL_REGIONS
    if storage_class in ANYWHERE_CLASSES:
        return None
    if storage_class == "MULTI_REGIONAL" and multi:
        return None
    if storage_class == "REGIONAL" and not multi:
        return None
    return BAD_COMBINATION


def error_body(code: int, message: str, reason: str) -> bytes:
    return json.dumps(
        {
            "error": {
                "code": code,
                "message": message,
                "errors": [{"message": message, "domain": "global", "reason": reason}],
            }
        }
    ).encode()


class GcsGate:
    """Decides each request: None to pass it to the emulator, or (status, JSON body)."""

    def __init__(self) -> None:
        self.roles_of: RolesOf | None = None  # None: every caller is the owner
        self.constraints: set[str] = set()  # enforced organisation policies (gcs_policy)
        self.denied: list[tuple[str, str, str]] = []  # (principal, permission, path)
        # roles granted on one bucket ({bucket: {principal: {role without "roles/"}}}): Cloud
        # Storage adds a bucket's policy to the project's (https://cloud.google.com/storage/
        # docs/access-control/iam: "permissions granted at the project level ... and at the
        # bucket level" both apply)
        self.bucket_roles: dict[str, dict[str, set[str]]] = {}

    def roles(self, principal: str, path: str) -> set[str]:
        """The principal's roles on the project, with those on the path's bucket."""
        project = self.roles_of(principal) if self.roles_of is not None else set()
        return project | self.bucket_roles.get(bucket_of(path), {}).get(principal, set())

    def bucket_policy(self, bucket: str) -> tuple[int, bytes]:
        """buckets.getIamPolicy (storage.v1 discovery document: GET b/{bucket}/iam, a Policy:
        kind storage#policy, resourceId projects/_/buckets/<bucket>, bindings[] {role,
        members}, etag, version)."""
        by_role: dict[str, list[str]] = {}
        for principal, roles in self.bucket_roles.get(bucket, {}).items():
            for role in roles:
                by_role.setdefault(f"roles/{role}", []).append(f"serviceAccount:{principal}")
        policy = {
            "kind": "storage#policy",
            "resourceId": f"projects/_/buckets/{bucket}",
            "version": 1,
            "etag": "CAE=",
            "bindings": [{"role": r, "members": sorted(m)} for r, m in sorted(by_role.items())],
        }
        return HTTPStatus.OK, json.dumps(policy).encode()

    def check(
        self, method: str, path: str, authorization: str, body: bytes
    ) -> tuple[int, bytes] | None:
        token = authorization.removeprefix("Bearer ").strip()
        iam = _BUCKET_IAM.match(urlsplit(path).path) if method == "GET" else None
        if iam and iam.group(1) in self.bucket_roles:  # else the emulator's answer
            return self.bucket_policy(iam.group(1))
        wanted = permission(method, path)
        if token.startswith(TOKEN_PREFIX) and wanted and self.roles_of is not None:
            principal = token.removeprefix(TOKEN_PREFIX)
            for needed, what, on in permissions(method, path):
                if allowed(self.roles(principal, on), needed):
                    continue
                self.denied.append((principal, needed, on))
                message = (
                    f"{principal} does not have {needed} access to the Google Cloud Storage "
                    f"{what}. Permission '{needed}' denied on resource (or it may not exist)."
                )
                return HTTPStatus.FORBIDDEN, error_body(403, message, "forbidden")
        if wanted and wanted[0] == "storage.buckets.create" and body:
            try:
                request = json.loads(body)
            except ValueError:
                return None
            if problem := location_class_error(request):
                return HTTPStatus.BAD_REQUEST, error_body(400, problem, "invalid")
            if problem := policy_violation(request, self.constraints):
                return HTTPStatus.PRECONDITION_FAILED, error_body(412, problem, "conditionNotMet")
        return None
