"""The Hugging Face token is valid and may read the model (its licence accepted, for a gated
repository such as google/gemma-*): the Hub's REST endpoints, as huggingface_hub 2.4 calls them.

- token: GET /api/whoami-v2 (hf_api.py, HfApi._inner_whoami; 401 = "Invalid user token.")
- access: GET /api/models/<repo_id>/auth-check (hf_api.py, HfApi.auth_check); refusals carry
  the `X-Error-Code` header (utils/_http.py, hf_raise_for_status): `GatedRepo` when the
  licence is not accepted, `RepoNotFound` for a missing or private repository.
"""

from __future__ import annotations

import requests

from tpu_rl import deployment
from tpu_rl.preflight.google_api import TIMEOUT_S
from tpu_rl.preflight.result import CheckResult, failed, passed
from tpu_rl.settings.fields import RunSettings

HUB = "huggingface.co"
TOKEN, LICENCE = "hf token", "hf model access"


def check_huggingface(s: RunSettings, token: str) -> list[CheckResult]:
    """The token's owner, then access to each repository the run downloads."""
    base = deployment.api_endpoint(HUB)
    headers = {"Authorization": f"Bearer {token}"}
    who = requests.get(f"{base}/api/whoami-v2", headers=headers, timeout=TIMEOUT_S)
    if who.status_code != 200:
        return [
            failed(
                TOKEN,
                f"{HUB} refused the token (HTTP {who.status_code}: "
                f"{who.headers.get('X-Error-Message') or who.text[:120]})",
                f"make a Read token at https://{HUB}/settings/tokens and put it in the "
                f"connection {deployment.hf_conn_id()!r}'s password",
            )
        ]
    owner = who.json()
    results = [passed(TOKEN, f"valid, owned by {owner.get('name', '?')}")]
    for repo in dict.fromkeys((s.hf_model_path, s.tokenizer_path)):
        results.append(_check_access(base, headers, repo))
    return results


def _check_access(base: str, headers: dict[str, str], repo: str) -> CheckResult:
    url = f"{base}/api/models/{repo}/auth-check"
    answer = requests.get(url, headers=headers, timeout=TIMEOUT_S)
    name = f"{LICENCE} ({repo})"
    if answer.status_code == 200:
        return passed(name, f"the token may read {repo}")
    code = answer.headers.get("X-Error-Code", "")
    message = answer.headers.get("X-Error-Message") or answer.text[:160]
    if code == "GatedRepo":
        return failed(
            name,
            f"{repo} is gated and the token's owner has not been granted access ({message})",
            f"accept the model's licence on https://{HUB}/{repo} while logged in as the "
            "token's owner, then wait for the grant",
        )
    return failed(
        name,
        f"{repo} cannot be read (HTTP {answer.status_code} {code}: {message})",
        f"check hf_model_path / tokenizer_path name an existing repository ({HUB}/{repo})",
    )
