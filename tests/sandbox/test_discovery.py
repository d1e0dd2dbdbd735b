"""The sandbox's Google API emulators hold requests and answers to Google's discovery documents
(sandbox/discovery.py): a misspelt field, a wrong type or an unknown query parameter gets
Google's 400; a correct request passes; an answer outside the schema fails loudly."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests

from sandbox import discovery
from sandbox.cloud import GcsEmulator
from sandbox.google_apis import GoogleApisEmulator
from sandbox.vertex_api import VertexRegistryFake

RESOURCE_MANAGER = "cloudresourcemanager.googleapis.com"
COMPUTE = "compute.googleapis.com"
AUTH = {"Authorization": "Bearer sandbox"}
PROJECT = "/v3/projects/my-tpu-project"
RESERVATION = "/compute/v1/projects/my-tpu-project/zones/us-east5-b/reservations"


@pytest.fixture
def google() -> Iterator[GoogleApisEmulator]:
    emulator = GoogleApisEmulator()
    yield emulator
    emulator.stop()


def _post(google: GoogleApisEmulator, host: str, path: str, body: object) -> requests.Response:
    return requests.post(google.endpoints()[host] + path, json=body, headers=AUTH, timeout=10)


def _get(google: GoogleApisEmulator, host: str, path: str, **params: str) -> requests.Response:
    url = google.endpoints()[host] + path
    return requests.get(url, params=params, headers=AUTH, timeout=10)


def test_a_misspelt_body_field_is_refused_with_google_400(google: GoogleApisEmulator) -> None:
    answer = _post(google, RESOURCE_MANAGER, f"{PROJECT}:testIamPermissions", {"permission": []})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert error["message"] == (
        'Invalid JSON payload received. Unknown name "permission": Cannot find field.'
    )
    assert error["details"][0]["fieldViolations"][0]["field"] == "permission"


def test_a_misspelt_nested_field_names_where_it_is() -> None:
    body = b'{"specificReservation": {"cuont": "8"}}'
    status, _, payload = discovery.refusal(COMPUTE, "POST", RESERVATION, body) or (0, {}, {})
    assert status == 400
    assert payload["error"]["message"] == (
        'Invalid JSON payload received. Unknown name "cuont" at '
        "'reservation.specific_reservation': Cannot find field."
    )


def test_a_wrong_type_is_refused(google: GoogleApisEmulator) -> None:
    body = {"options": {"requestedPolicyVersion": "three"}}
    answer = _post(google, RESOURCE_MANAGER, f"{PROJECT}:getIamPolicy", body)
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == (
        "Invalid value at 'options.requested_policy_version' (TYPE_INT32), \"three\""
    )


def test_an_unknown_query_parameter_is_refused(google: GoogleApisEmulator) -> None:
    path = "/compute/v1/projects/my-tpu-project/aggregated/machineTypes"
    answer = _get(google, COMPUTE, path, fliter='name = "ct6e-standard-4t"')
    assert answer.status_code == 400
    assert 'Unknown name "fliter": Cannot bind query parameter' in answer.json()["error"]["message"]


def test_a_correct_request_passes(google: GoogleApisEmulator) -> None:
    body = {"options": {"requestedPolicyVersion": 3}}
    assert _post(google, RESOURCE_MANAGER, f"{PROJECT}:getIamPolicy", body).status_code == 200
    path = "/compute/v1/projects/my-tpu-project/aggregated/machineTypes"
    listed = _get(google, COMPUTE, path, filter='name = "ct6e-standard-4t"')
    assert listed.status_code == 200, listed.text
    # int64 given as a number or a string in a request (proto3 JSON mapping)
    for count in (8, "8"):
        body = {"name": "r", "specificReservation": {"count": count}}
        assert discovery.refusal(COMPUTE, "POST", RESERVATION, json.dumps(body).encode()) is None


def test_a_wrong_answer_fails_loudly(google: GoogleApisEmulator) -> None:
    """A reservation answered with its int64 count as a JSON number (Google sends a string)."""

    def numeric_count(zone: str, name: str) -> discovery.Answer:
        answer = {"name": name, "specificReservation": {"count": 8}}
        return 200, {}, answer

    google.facts.reservation = numeric_count  # type: ignore[method-assign]
    answer = _get(google, COMPUTE, f"{RESERVATION}/r")
    assert answer.status_code == discovery.SANDBOX_BUG
    assert "compute.reservations.get" in answer.json()["error"]["message"]
    assert "specific_reservation.count" in answer.json()["error"]["message"]
    with pytest.raises(discovery.SchemaMismatch, match="unknown field 'cuont'"):
        discovery.verify(COMPUTE, "GET", f"{RESERVATION}/r", 200, {"cuont": "8"})


def test_vertex_refuses_a_misspelt_upload_field() -> None:
    vertex = VertexRegistryFake()
    try:
        path = "/v1/projects/p/locations/us-east5/models:upload"
        body = {"modelId": "m", "model": {"displayName": "m", "artifactUrl": "gs://b/x"}}
        answer = requests.post(vertex.url + path, json=body, timeout=10)
        assert answer.status_code == 400
        assert answer.json()["error"]["message"] == (
            "Invalid JSON payload received. Unknown name \"artifactUrl\" at 'model': "
            "Cannot find field."
        )
        assert vertex.models == {}
    finally:
        vertex.stop()


def test_gcs_refuses_a_misspelt_bucket_field_and_answers_google_errors() -> None:
    """Cloud Storage's 400 for a misspelt field; a missing object's 404 in its JSON error shape
    (gcp-storage-emulator answers that one with no body)."""
    gcs = GcsEmulator()
    try:
        body = {"name": "bk", "storageClas": "STANDARD"}
        made = requests.post(f"{gcs.host}/storage/v1/b?project=sandbox", json=body, timeout=10)
        assert made.status_code == 400
        assert 'Unknown name "storageClas"' in made.json()["error"]["message"]
        assert gcs.bucket_metadata("bk") is None
        gcs.write("gs://bk/present")
        missing = requests.get(f"{gcs.host}/storage/v1/b/bk/o/absent", timeout=10)
        assert missing.status_code == 404
        assert missing.json()["error"]["message"] == "No such object: bk/absent"
    finally:
        gcs.stop()
