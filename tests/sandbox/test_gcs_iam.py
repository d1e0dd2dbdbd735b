"""The sandbox's Cloud Storage permission checks (sandbox.gcs_iam)."""

from __future__ import annotations

from sandbox.gcs_iam import TOKEN_PREFIX, GcsGate

REWRITE = "/storage/v1/b/src/o/run%2F30%2Fa/rewriteTo/b/dst/o/quarantine%2F30%2Fa"


def _gate(bucket_roles: dict[str, dict[str, set[str]]]) -> GcsGate:
    gate = GcsGate()
    gate.roles_of = lambda principal: set()
    gate.bucket_roles = bucket_roles
    return gate


def test_a_rewrite_needs_create_on_its_destination_bucket():
    """Reading the source is not enough: GCS refuses a rewrite into a bucket the caller cannot
    write (objects.rewrite needs storage.objects.create there)."""
    gate = _gate({"src": {"pod": {"storage.objectViewer"}}})
    status, body = gate.check("POST", REWRITE, f"Bearer {TOKEN_PREFIX}pod", b"")
    assert status == 403 and b"storage.objects.create" in body
    assert gate.denied == [
        ("pod", "storage.objects.create", "/storage/v1/b/dst/o/quarantine%2F30%2Fa")
    ]


def test_a_rewrite_passes_with_get_on_the_source_and_create_on_the_destination():
    roles = {"src": {"pod": {"storage.objectViewer"}}, "dst": {"pod": {"storage.objectCreator"}}}
    assert _gate(roles).check("POST", REWRITE, f"Bearer {TOKEN_PREFIX}pod", b"") is None


def test_a_rewrite_needs_get_on_its_source():
    gate = _gate({"dst": {"pod": {"storage.objectCreator"}}})
    status, _ = gate.check("POST", REWRITE, f"Bearer {TOKEN_PREFIX}pod", b"")
    assert status == 403 and gate.denied[0][1] == "storage.objects.get"
