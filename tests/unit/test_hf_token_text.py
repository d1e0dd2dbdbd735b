"""A Hugging Face connection password holding whitespace or a control character. The one
rule (tpu_rl.deployment.token_of_password), applied where every reader gets
the token (deployment.hf_token): the whitespace around the token is stripped, with a warning;
any left inside, a control or a non-ASCII character refuses it; no message quotes it. So
validate, preflight, the run's Secret and the Jobs it feeds see one clean token or none."""

from __future__ import annotations

import logging

import pytest

from tests.support.hf_connection import TOKEN, use_password
from tpu_rl import deployment


@pytest.mark.parametrize("password", [f"{TOKEN}\n", f"{TOKEN}\r\n", f"  {TOKEN}\t"])
def test_the_whitespace_around_the_token_is_stripped_with_a_warning(monkeypatch, caplog, password):
    use_password(monkeypatch, password)
    with caplog.at_level(logging.WARNING, logger="tpu_rl.deployment"):
        assert deployment.hf_token() == TOKEN
    assert "'hf_text': its password has whitespace or a line break around" in caplog.text
    assert "SECRET" not in caplog.text


@pytest.mark.parametrize(
    "password",
    [
        "hf_SECRET token123",
        "hf_SECRET\ntoken123",
        "hf_SECRET\ttoken123\n",
        "hf_SECRET\x00token123",
        "hf_SECRET\x7ftoken123",
        "hf_SECRET\u00a0token123",  # a no-break space, pasted from a web page
        "hf_SECRET\u200btoken123",  # a zero-width space
    ],
)
def test_whitespace_or_a_control_character_inside_refuses_the_token(monkeypatch, password):
    use_password(monkeypatch, password)
    with pytest.raises(deployment.DeploymentError) as refused:
        deployment.hf_token()
    message = str(refused.value)
    assert "'hf_text': its password holds whitespace, a control character or a non-ASCII" in (
        message
    )
    assert "(character 10 of 18)" in message and "SECRET" not in message


def test_a_password_of_whitespace_only_is_no_password(monkeypatch):
    use_password(monkeypatch, " \r\n")
    with pytest.raises(deployment.DeploymentError, match="'hf_text' has no password"):
        deployment.hf_token()
