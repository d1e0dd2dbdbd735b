"""The environment gcluster and terraform run in: the connection's Google credentials, with the
key's secrets registered with Airflow's masker."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Service-account key fields that must never reach a log.
KEY_SECRET_FIELDS = ("private_key", "private_key_id", "client_secret", "refresh_token")


@contextmanager
def google_env(gcp_conn_id: str, project: str) -> Iterator[tuple[dict[str, str], list[str]]]:
    """Environment for gcluster/terraform with the connection's credentials, and its secrets."""
    from airflow.providers.google.common.hooks.base_google import GoogleBaseHook
    from airflow.sdk.log import mask_secret

    hook = GoogleBaseHook(gcp_conn_id=gcp_conn_id)
    with hook.provide_gcp_credential_file_as_context() as key_file:
        secrets = key_secrets(key_file)
        for secret in secrets:
            mask_secret(secret)
        env = {
            **os.environ,  # GOOGLE_APPLICATION_CREDENTIALS is set here when the key is in Airflow
            "CLOUDSDK_CORE_PROJECT": project,
            "TF_IN_AUTOMATION": "1",
            "TF_INPUT": "0",
        }
        yield env, secrets


def key_secrets(key_file: str | None) -> list[str]:
    """The secret fields of a service-account key file."""
    if not key_file:
        return []  # application default credentials of the worker: nothing of ours to mask
    try:
        key = json.loads(Path(key_file).read_text())
    except (OSError, ValueError):
        return []
    return [str(key[f]) for f in KEY_SECRET_FIELDS if isinstance(key, dict) and key.get(f)]
