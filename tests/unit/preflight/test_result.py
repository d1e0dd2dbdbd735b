"""tpu_rl.preflight.result: the check lines and which errors a retry may clear."""

from __future__ import annotations

import dataclasses

import pytest
import requests
from kubernetes.client.rest import ApiException
from urllib3.exceptions import LocationParseError

from tpu_rl.preflight.google_api import ApiRefusal
from tpu_rl.preflight.result import CheckResult, guarded, is_transient, report_lines


def test_a_line_says_pass_or_fail_the_evidence_and_on_fail_the_fix():
    assert CheckResult("a", True, "read x").line() == "PASS a: read x"
    failed = CheckResult("b", False, "read y", "do z")
    assert failed.line() == "FAIL b: read y -> fix: do z"
    lines = report_lines([failed], notes=["estimate: 1 chip-hour"])
    assert lines == [  # the verdict first, the estimate's price lists last
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


def test_a_check_result_is_a_frozen_dataclass_with_its_evidence_masked():
    result = CheckResult("hf token", False, "sent Bearer hf_SECRETtoken123456", "fix")
    assert dataclasses.is_dataclass(result) and "SECRET" not in result.evidence
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.passed = True  # type: ignore[misc]
    assert dataclasses.replace(result, name="b").evidence == result.evidence
