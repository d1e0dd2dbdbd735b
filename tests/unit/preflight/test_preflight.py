"""Preflight's pieces without a cloud: the result lines, which errors a retry may clear, the
typed clients' refusals, image manifest URLs, the deployment's endpoints and PriorityClass."""

from __future__ import annotations

import json

import pytest
import requests
from kubernetes.client.rest import ApiException
from urllib3.exceptions import LocationParseError

from tpu_rl import deployment
from tpu_rl.backend.jobset import backend_jobset
from tpu_rl.jobs.manifests import conversion_job, train_job
from tpu_rl.layout import RunLayout
from tpu_rl.preflight import huggingface
from tpu_rl.preflight.google_api import TIMEOUT_S, ApiRefusal, read, read_or_none
from tpu_rl.preflight.images import manifest_url
from tpu_rl.preflight.result import CheckResult, guarded, is_transient, report_lines
from tpu_rl.preflight.run import RETRY
from tpu_rl.settings.run_settings import load_settings


def test_a_line_says_pass_or_fail_the_evidence_and_on_fail_the_fix():
    assert CheckResult("a", True, "read x").line() == "PASS a: read x"
    failed = CheckResult("b", False, "read y", "do z")
    assert failed.line() == "FAIL b: read y -> fix: do z"
    lines = report_lines([failed], notes=["estimate: 1 chip-hour"])
    assert lines == [  # issue 60: the verdict first, the estimate's price lists last
        "0 of 1 checks passed, 1 failed, 0 skipped",
        "FAIL b: read y -> fix: do z",
        "estimate: 1 chip-hour",
    ]
    moot = CheckResult("c", False, "needs b", skipped=True)
    assert moot.line() == "SKIPPED c: needs b" and not moot.failed
    assert report_lines([failed, moot])[0] == "0 of 2 checks passed, 1 failed, 1 skipped"


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (ApiRefusal(503, "backend error"), True),
        (ApiRefusal(429, "rate"), True),
        (ApiRefusal(404, "not found"), False),
        (ApiRefusal(403, "denied", "SERVICE_DISABLED"), False),
        (ApiException(status=500), True),
        (ApiException(status=404), False),
        (requests.ConnectionError("refused"), True),
        (requests.ReadTimeout("slow"), True),
        (requests.exceptions.ChunkedEncodingError("cut"), True),
        (ValueError("a bug"), False),
        # a request the HTTP library refused to make: a value of ours to correct
        (requests.exceptions.InvalidHeader("Invalid ... in header value: 'x\\n'"), False),
        (requests.exceptions.InvalidURL("Invalid URL 'https://'"), False),
        (requests.exceptions.MissingSchema("Invalid URL 'h': No scheme supplied"), False),
        (requests.exceptions.InvalidSchema("No connection adapters were found"), False),
        (LocationParseError("h:x"), False),
    ],
)
def test_only_errors_without_an_answer_or_5xx_429_may_clear_on_a_retry(error, transient):
    assert is_transient(error) is transient
    (result,) = guarded("x", "fix it", lambda: (_ for _ in ()).throw(error))
    assert (
        not result.passed and result.transient is transient and "the read failed" in result.evidence
    )


def test_a_token_requests_refuses_in_a_header_is_masked_and_not_retried(tutorial_conf):
    """Issue 43, finding 1: requests refuses the header before any connection and quotes it
    (requests/utils.py _validate_header_part); preflight printed that whole, as a transient
    error to retry, with the fix "check the API's status and the network"."""
    settings = load_settings(tutorial_conf)
    token = "hf_SECRETtoken123\n"
    (result,) = guarded(
        huggingface.TOKEN, RETRY, lambda: huggingface.check_huggingface(settings, token)
    )
    line = result.line()
    assert "SECRET" not in line and "token123" not in line, line
    assert "InvalidHeader: Invalid leading whitespace" in line and "'Bearer ***'" in line
    assert not result.transient and "network" not in result.fix
    assert result.fix.startswith("correct the value the request was made of")


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


def test_manifest_urls_follow_the_registry_api():
    assert manifest_url("us-docker.pkg.dev/a/b/c:0.2.4") == (
        "us-docker.pkg.dev",
        "https://us-docker.pkg.dev/v2/a/b/c/manifests/0.2.4",
    )
    digest = "sha256:" + "a" * 64
    assert manifest_url(f"gcr.io/p/i@{digest}")[1] == f"https://gcr.io/v2/p/i/manifests/{digest}"
    assert manifest_url("ubuntu:22.04") == (
        "registry-1.docker.io",
        "https://registry-1.docker.io/v2/library/ubuntu/manifests/22.04",
    )


def test_api_endpoints_default_to_https_and_take_the_deployments_overrides(monkeypatch):
    monkeypatch.delenv("TPU_RL_API_ENDPOINTS", raising=False)
    assert deployment.api_endpoint("compute.googleapis.com") == "https://compute.googleapis.com"
    monkeypatch.setenv("TPU_RL_API_ENDPOINTS", '{"compute.googleapis.com": "http://h:1/x/"}')
    assert deployment.api_endpoint("compute.googleapis.com") == "http://h:1/x"
    assert deployment.api_endpoint("huggingface.co") == "https://huggingface.co"
    monkeypatch.setenv("TPU_RL_API_ENDPOINTS", "[1]")
    with pytest.raises(deployment.DeploymentError, match="must be a JSON object"):
        deployment.api_endpoint("huggingface.co")


def test_every_pod_of_the_run_names_the_deployments_priority_class(monkeypatch, tutorial_conf):
    layout = RunLayout(load_settings(tutorial_conf), "manual__p", "dep")
    monkeypatch.delenv("TPU_RL_PRIORITY_CLASS", raising=False)
    assert "priorityClassName" not in train_job(layout)["spec"]["template"]["spec"]
    monkeypatch.setenv("TPU_RL_PRIORITY_CLASS", "high")
    pods = [
        train_job(layout)["spec"]["template"]["spec"],
        conversion_job(layout)["spec"]["template"]["spec"],
        *(
            rj["template"]["spec"]["template"]["spec"]
            for rj in backend_jobset(layout)["spec"]["replicatedJobs"]
        ),
    ]
    assert [pod.get("priorityClassName") for pod in pods] == ["high"] * 4
