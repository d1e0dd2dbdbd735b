"""`make preflight` without a connection or without Google credentials: every check has its
line (PASS, FAIL with its fix, or SKIPPED with why), then the count, rather than one line and a
30-line DefaultCredentialsError traceback at the first problem."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO, TUTORIAL_CONF

LINE_WORDS = ("PASS ", "FAIL ", "SKIPPED ")


def run_tool(tmp_path, **env: str) -> subprocess.CompletedProcess:
    kept = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW_CONN_", "GOOGLE_", "CLOUDSDK_", "TPU_RL_"))
    }
    # no application-default credentials: an empty HOME and gcloud config, and google-auth
    # told not to ask the GCE metadata server (environment_vars.NO_GCE_CHECK)
    quiet = {"HOME": str(tmp_path), "CLOUDSDK_CONFIG": str(tmp_path), "NO_GCE_CHECK": "True"}
    return subprocess.run(
        [sys.executable, "-m", "tools.preflight", str(TUTORIAL_CONF)],
        cwd=REPO,
        env={**kept, "PYTHONPATH": f"{REPO / 'plugins'}:{REPO}", **quiet, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def checks(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(LINE_WORDS)]


def test_no_connections_is_one_fail_line_each_and_every_other_check_listed(tmp_path):
    done = run_tool(tmp_path)
    assert "Traceback" not in done.stdout + done.stderr
    lines = checks(done.stdout)
    assert lines[0].startswith("FAIL google connection: ") and "-> fix: " in lines[0]
    assert "SKIPPED apis enabled: needs Google credentials" in done.stdout
    assert lines[1].startswith("FAIL hf connection: ") and "-> fix: " in lines[1]
    assert "SKIPPED hf token: needs the Hugging Face token (hf connection failed)" in lines
    assert any(line.startswith("PASS vertex registry") for line in lines)
    verdict = f"1 of {len(lines)} checks passed, 2 failed, 7 skipped"
    assert done.stdout.splitlines()[0] == verdict  # before the estimate's price lists
    assert done.returncode == 1


def test_a_google_connection_without_credentials_fails_one_line_not_a_traceback(tmp_path):
    done = run_tool(
        tmp_path,
        AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT="google-cloud-platform://",
        AIRFLOW_CONN_HUGGINGFACE_DEFAULT='{"conn_type": "generic", "password": "hf_x"}',
        # no network: the token's check reaches a closed port on loopback and fails at once
        TPU_RL_API_ENDPOINTS='{"huggingface.co": "http://127.0.0.1:9"}',
    )
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-2000:]
    lines = checks(done.stdout)
    assert lines[0].startswith("FAIL google credentials: connection 'google_cloud_default': ")
    assert "DefaultCredentialsError" in lines[0]
    assert "-> fix: gcloud auth application-default login" in lines[0]
    skipped = [line for line in lines if line.startswith("SKIPPED ")]
    assert len(skipped) == 6 and all("google credentials failed" in s for s in skipped)
    assert done.returncode == 1


def test_credentials_that_get_no_token_fail_one_line_at_once(tmp_path):
    """A service account key whose token endpoint cannot be reached (make demo-ui's newcomer
    offline with a key): every Google check tried the token itself, urllib3 logged 36
    'Retrying' lines between the check lines and the tool took 1 min 54 s; now the credentials'
    one token is asked for first, and the checks that need it are SKIPPED."""
    import json

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    key = tmp_path / "key.json"
    key.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "p",
                "private_key_id": "k",
                "private_key": pem.decode(),
                "client_email": "rl@p.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": "http://127.0.0.1:9/token",  # a closed port on loopback
            }
        )
    )
    done = run_tool(
        tmp_path,
        GOOGLE_APPLICATION_CREDENTIALS=str(key),
        AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT="google-cloud-platform://",
        AIRFLOW_CONN_HUGGINGFACE_DEFAULT='{"conn_type": "generic", "password": "hf_x"}',
        TPU_RL_API_ENDPOINTS='{"huggingface.co": "http://127.0.0.1:9"}',
    )
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-2000:]
    assert "Retrying" not in done.stdout + done.stderr
    lines = checks(done.stdout)
    assert lines[0].startswith("FAIL google credentials: connection 'google_cloud_default': ")
    skipped = [line for line in lines if line.startswith("SKIPPED ")]
    assert len(skipped) == 6 and all("google credentials failed" in s for s in skipped), lines
    assert done.returncode == 1
