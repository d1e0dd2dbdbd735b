"""The secrets of the connection's key that gcluster and terraform run with
(tpu_rl.cluster.credentials.key_secrets)."""

from __future__ import annotations

import json

from tpu_rl.cluster.credentials import KEY_SECRET_FIELDS, key_secrets


def test_a_service_account_keys_secret_fields_are_its_secrets(tmp_path):
    key = tmp_path / "key.json"
    key.write_text(
        json.dumps(
            {
                "type": "service_account",
                "client_email": "sa@p.iam.gserviceaccount.com",
                "private_key_id": "abc123",
                "private_key": "-----BEGIN PRIVATE KEY-----\nMII\n-----END PRIVATE KEY-----\n",
                "client_secret": "",
            }
        )
    )
    assert key_secrets(str(key)) == [
        "-----BEGIN PRIVATE KEY-----\nMII\n-----END PRIVATE KEY-----\n",
        "abc123",
    ]
    assert "client_email" not in KEY_SECRET_FIELDS


def test_no_key_or_one_that_cannot_be_read_has_no_secrets(tmp_path):
    assert key_secrets(None) == [] and key_secrets("") == []
    assert key_secrets(str(tmp_path / "missing.json")) == []
    (tmp_path / "bad.json").write_text("{not json")
    assert key_secrets(str(tmp_path / "bad.json")) == []
    (tmp_path / "list.json").write_text('["private_key"]')
    assert key_secrets(str(tmp_path / "list.json")) == []
