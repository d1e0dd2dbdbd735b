"""The Hugging Face token's pieces a line wrap leaves, masked wherever the run relays text."""

from __future__ import annotations

import asyncio
import json

import pytest

from tpu_rl import deployment
from tpu_rl.report.failures import first_line
from tpu_rl.token_masking import (
    MIN_PIECE,
    aregister_hf_token,
    mask_credentials,
    redact,
    register_hf_token,
    register_token,
)


def test_every_wrap_of_the_token_with_or_without_its_prefix_leaves_no_piece(monkeypatch):
    token = "hf_EveryWrap0123456789abcdefGHIJKLmn"
    monkeypatch.setenv(
        "AIRFLOW_CONN_HF_EVERYWRAP", json.dumps({"conn_type": "http", "password": token})
    )
    monkeypatch.setenv("TPU_RL_HF_CONN_ID", "hf_everywrap")
    deployment.hf_token()
    for form in (token, token[3:]):
        for cut in range(1, len(form)):
            head, tail = form[:cut], form[cut:]
            masked = redact(f"2026-12-03T00:00:00Z using {head}\n2026-12-03T00:00:01Z {tail} ok")
            for piece in (head, tail):
                assert len(piece) < MIN_PIECE or piece not in masked, (cut, masked)
            assert masked.endswith(" ok")


def test_a_process_that_never_read_the_token_masks_it_once_registered(monkeypatch):
    token = "hf_CallbackSide0123456789abcdefXY"
    monkeypatch.setenv(
        "AIRFLOW_CONN_HF_CALLBACK", json.dumps({"conn_type": "http", "password": token})
    )
    monkeypatch.setenv("TPU_RL_HF_CONN_ID", "hf_callback")
    error = RuntimeError(f"login failed for {token[3:20]}\n{token[20:]}")
    assert token[3:20] in first_line(error)  # nothing registered it in this process yet
    register_hf_token(deployment.hf_conn_id())
    assert token[3:20] not in first_line(error) and token[3:] not in redact(f"x {token[3:]} y")


def test_a_missing_connection_is_skipped_quietly(monkeypatch):
    monkeypatch.setenv("TPU_RL_HF_CONN_ID", "hf_not_there")
    register_hf_token(deployment.hf_conn_id())
    asyncio.run(aregister_hf_token(deployment.hf_conn_id()))


def test_a_token_read_with_its_newline_is_masked_as_printed():
    """Registered as read ("...\\n"), a token is masked in its printed form too, without the
    newline or with it escaped by repr."""
    register_token("hf_NewlineEnded0123456789abcXY\n")
    text = "header value: 'Bearer hf_NewlineEnded0123456789abcXY\\n' and NewlineEnded01234567"
    assert "NewlineEnded" not in mask_credentials(text) and "NewlineEnded" not in redact(text)


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        (
            "Invalid ... in header value: 'Bearer hf_Unregistered0123\\r\\n'",
            "Invalid ... in header value: 'Bearer ***'",
        ),
        ("{'Authorization': 'Basic dXNlcjpwYXNz'}", "{'Authorization': '***'}"),
        ("Authorization: Bearer ya29.a0Af", "Authorization: ***"),
        ("GET https://user:s3cr3t@host/x failed", "GET https://user:***@host/x failed"),
        (
            "GET https://h/v1/x?alt=json&key=AIzaSyX&access_token=ya29.b HTTP/1.1",
            "GET https://h/v1/x?alt=json&key=***&access_token=*** HTTP/1.1",
        ),
        ("the token hf_UnregisteredToken987 was refused", "the token *** was refused"),
    ],
)
def test_an_error_text_shows_no_credential(text, masked):
    assert mask_credentials(text) == masked


def test_the_words_around_credentials_stay_in_view():
    text = "set hf_revision and hf_model_path; Invalid credentials in Authorization header"
    assert mask_credentials(text) == text


def test_redact_masks_credentials():
    text = (
        "Config param hf_access_token: hf_AbCdEfGhIjKlMnOp\n"
        "Authorization: Bearer ya29.a0AfH6SMBx-secret\n"
        "password=hunter2 api_key: 'abc123' fine=value"
    )
    masked = redact(text)
    for secret in ("hf_AbCdEfGhIjKlMnOp", "ya29.a0AfH6SMBx-secret", "hunter2", "abc123"):
        assert secret not in masked
    assert "fine=value" in masked and "hf_access_token" in masked
