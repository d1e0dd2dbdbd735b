"""tpu_rl.preflight.huggingface: the token's owner and its access to each repository the run
downloads; a token the HTTP library refuses stays masked."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import requests

from tpu_rl.preflight import huggingface
from tpu_rl.preflight.result import guarded
from tpu_rl.preflight.run import RETRY
from tpu_rl.settings.run_settings import load_settings


def test_a_token_requests_refuses_in_a_header_is_masked_and_not_retried(tutorial_conf):
    """A token holding whitespace or a control character: requests refuses the header before any
    connection and quotes it (requests/utils.py _validate_header_part); preflight masks the
    token and reports no transient error to retry, nor the fix "check the API's status and the
    network"."""
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


class Hub:
    """huggingface.co's answers by URL path: (status, headers, json)."""

    def __init__(self, answers: dict[str, tuple[int, dict[str, str], dict]]) -> None:
        self.answers, self.asked = answers, []

    def get(self, url: str, headers: dict[str, str], timeout: float) -> SimpleNamespace:
        path = url.split(huggingface.HUB, 1)[1]
        self.asked.append((path, headers["Authorization"]))
        status, answer_headers, body = self.answers[path]
        return SimpleNamespace(
            status_code=status, headers=answer_headers, text=str(body), json=lambda: body
        )


@pytest.fixture
def hub(monkeypatch) -> Hub:
    monkeypatch.delenv("TPU_RL_API_ENDPOINTS", raising=False)
    found = Hub({})
    monkeypatch.setattr(requests, "get", found.get)
    return found


def test_a_valid_token_with_access_to_each_repository_passes(tutorial_conf, hub):
    s = load_settings(tutorial_conf)
    hub.answers["/api/whoami-v2"] = (200, {}, {"name": "ana"})
    for repo in {s.hf_model_path, s.tokenizer_path}:
        hub.answers[f"/api/models/{repo}/auth-check"] = (200, {}, {})
    results = huggingface.check_huggingface(s, "hf_tok")
    assert results[0].line() == "PASS hf token: valid, owned by ana"
    assert all(r.passed for r in results) and {h for _, h in hub.asked} == {"Bearer hf_tok"}


def test_a_gated_repository_says_to_accept_its_licence(tutorial_conf, hub):
    tutorial = load_settings(tutorial_conf)
    s = load_settings({**tutorial_conf, "tokenizer_path": tutorial.hf_model_path})
    hub.answers["/api/whoami-v2"] = (200, {}, {"name": "ana"})
    gated = {"X-Error-Code": "GatedRepo", "X-Error-Message": "access not granted"}
    hub.answers[f"/api/models/{s.hf_model_path}/auth-check"] = (403, gated, {})
    token, access = huggingface.check_huggingface(s, "hf_tok")
    assert token.passed and not access.passed
    assert "is gated and the token's owner has not been granted access" in access.evidence
    assert access.fix.startswith(
        f"accept the model's licence on https://huggingface.co/{s.hf_model_path}"
    )


def test_a_refused_token_is_one_failure_and_no_repository_is_read(tutorial_conf, hub):
    hub.answers["/api/whoami-v2"] = (401, {"X-Error-Message": "Invalid credentials"}, {})
    [result] = huggingface.check_huggingface(load_settings(tutorial_conf), "hf_bad")
    assert result.evidence == "huggingface.co refused the token (HTTP 401: Invalid credentials)"
    assert len(hub.asked) == 1
