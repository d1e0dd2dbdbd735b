"""The deployment's Hugging Face connection with a password of the test's choosing."""

from __future__ import annotations

import json

import pytest

TOKEN = "hf_SECRETtoken123"


def use_password(monkeypatch: pytest.MonkeyPatch, password: str) -> None:
    """The deployment's Hugging Face connection, with this password."""
    conn = {"conn_type": "generic", "password": password}
    monkeypatch.setenv("AIRFLOW_CONN_HF_TEXT", json.dumps(conn))
    monkeypatch.setenv("TPU_RL_HF_CONN_ID", "hf_text")
