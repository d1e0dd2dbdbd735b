"""Read-only REST calls to Google APIs with the deployment's Google credentials.

The credentials are the GCP connection's (the google provider's GoogleBaseHook), sent by
google-auth's AuthorizedSession; each host is reached at tpu_rl.deployment.api_endpoint. Only
GET, HEAD and the POSTs of read-only RPCs (`:testIamPermissions`, `:getIamPolicy`, listed in
READ_ONLY_RPCS) leave this module: preflight changes nothing.
"""

from __future__ import annotations

from typing import Any

from tpu_rl import deployment

# Methods that read although they are POSTs (https://cloud.google.com/resource-manager/reference
# /rest/v3/projects/testIamPermissions, .../projects/getIamPolicy).
READ_ONLY_RPCS = (":testIamPermissions", ":getIamPolicy")
TIMEOUT_S = 30


class ApiRefusal(RuntimeError):
    """An API answered an error: its HTTP status, Google's message and reason
    (`error.errors[].reason`, or the ErrorInfo detail's, e.g. SERVICE_DISABLED)."""

    def __init__(self, status: int, message: str, reason: str = "") -> None:
        super().__init__(f"HTTP {status}{f' {reason}' if reason else ''}: {message}")
        self.status, self.message, self.reason = status, message, reason


def refusal(response: Any) -> ApiRefusal:
    """The Google JSON error of a response (https://cloud.google.com/apis/design/errors)."""
    try:
        error = response.json().get("error") or {}
    except ValueError:
        return ApiRefusal(response.status_code, response.text[:300])
    reasons = [e.get("reason") for e in error.get("errors") or [] if e.get("reason")]
    reasons += [d.get("reason") for d in error.get("details") or [] if d.get("reason")]
    return ApiRefusal(
        response.status_code, str(error.get("message") or response.text[:300]), ",".join(reasons)
    )


class GoogleApi:
    """An authorized session for the deployment's GCP connection."""

    def __init__(self, gcp_conn_id: str) -> None:
        from airflow.providers.google.common.hooks.base_google import GoogleBaseHook
        from google.auth.transport.requests import AuthorizedSession

        self.credentials, self.project = GoogleBaseHook(
            gcp_conn_id=gcp_conn_id
        ).get_credentials_and_project_id()
        self.session = AuthorizedSession(self.credentials)

    def get(self, host: str, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """GET https://<host><path> (JSON), or ApiRefusal."""
        response = self.session.get(
            deployment.api_endpoint(host) + path, params=params, timeout=TIMEOUT_S
        )
        if response.status_code != 200:
            raise refusal(response)
        return response.json()

    def get_or_none(
        self, host: str, path: str, params: dict[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """GET as `get`, but None where the resource does not exist (404)."""
        try:
            return self.get(host, path, params)
        except ApiRefusal as err:
            if err.status != 404:
                raise
            return None

    def read_rpc(self, host: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST of a read-only RPC (READ_ONLY_RPCS), or ApiRefusal."""
        if not path.endswith(READ_ONLY_RPCS):
            raise ValueError(f"{path} is not a read-only RPC")
        response = self.session.post(
            deployment.api_endpoint(host) + path, json=body, timeout=TIMEOUT_S
        )
        if response.status_code != 200:
            raise refusal(response)
        return response.json()

    def head(self, url: str, headers: dict[str, str]) -> Any:
        """HEAD `url` with the caller's token; the response, whatever its status."""
        return self.session.head(url, headers=headers, timeout=TIMEOUT_S, allow_redirects=True)
