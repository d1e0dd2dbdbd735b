"""tpu_rl.preflight.google_api: the typed clients' refusals read as the REST calls did."""

from __future__ import annotations

import json

import pytest
import requests

from tpu_rl.preflight.google_api import TIMEOUT_S, ApiRefusal, read, read_or_none
from tpu_rl.preflight.result import guarded, is_transient


def _typed_refusal(status: int, error: dict[str, object]) -> Exception:
    """The exception a typed client's REST transport raises for Google's error answer
    (google-cloud-compute 1.57 rest.py: `core_exceptions.from_http_response(response)`)."""
    from google.api_core.exceptions import from_http_response

    response = requests.Response()
    response.status_code = status
    response._content = json.dumps({"error": {"code": status, **error}}).encode()
    response.request = requests.Request("GET", "https://compute.googleapis.com/x").prepare()
    return from_http_response(response)


def _raising(err: Exception) -> object:
    def rpc(**_: object) -> object:
        raise err

    return rpc


@pytest.mark.parametrize(
    ("status", "error", "line", "transient"),
    [
        (
            403,
            {
                "message": "Compute API is disabled",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": "SERVICE_DISABLED",
                    }
                ],
            },
            "HTTP 403 SERVICE_DISABLED: Compute API is disabled",
            False,
        ),
        (
            403,
            {"message": "denied", "errors": [{"reason": "forbidden", "message": "denied"}]},
            "HTTP 403 forbidden: denied",
            False,
        ),
        (503, {"message": "backend error"}, "HTTP 503: backend error", True),
        (429, {"message": "rate"}, "HTTP 429: rate", True),
    ],
)
def test_a_typed_clients_refusal_reads_as_the_rest_calls_did(status, error, line, transient):
    """google.api_core's exceptions become the ApiRefusal a REST call raised: the same line,
    reason (SERVICE_DISABLED) and transient verdict; one try, within the timeout."""
    seen: dict[str, object] = {}

    def rpc(**kwargs: object) -> object:
        seen.update(kwargs)
        raise _typed_refusal(status, error)

    with pytest.raises(ApiRefusal) as refused:
        read(rpc, "the request")
    assert str(refused.value) == line and is_transient(refused.value) is transient
    assert seen == {"request": "the request", "retry": None, "timeout": TIMEOUT_S}
    (result,) = guarded("x", "fix it", lambda: read(rpc, "the request"))
    assert result.evidence == f"the read failed: {line}" and result.transient is transient


def test_a_typed_read_of_what_does_not_exist_is_none():
    assert read_or_none(_raising(_typed_refusal(404, {"message": "gone"})), None) is None
    with pytest.raises(ApiRefusal, match="HTTP 400: bad"):
        read_or_none(_raising(_typed_refusal(400, {"message": "bad"})), None)
