"""Read-only calls to Google APIs with the deployment's Google credentials.

The credentials are the GCP connection's (the google provider's GoogleBaseHook); each host is
reached at tpu_rl.deployment.api_endpoint. Compute Engine and Resource Manager are read through
their typed clients (google-cloud-compute, google-cloud-resource-manager, pinned in both locks)
on the REST transport (`client`, `read`); Service Usage and Cloud Quotas, whose clients no lock
pins, through google-auth's AuthorizedSession (`get`). Only reads leave this module: GET, HEAD,
and the typed clients' get, aggregatedList, getIamPolicy and testIamPermissions: preflight
changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from tpu_rl import deployment

TIMEOUT_S = 30
Answer = TypeVar("Answer")


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


def read(rpc: Callable[..., Answer], request: Any) -> Answer:
    """A typed client's read `rpc(request=...)`, tried once within TIMEOUT_S as `get` is; a
    Google error answer raises the ApiRefusal `get` would (google-api-core's
    GoogleAPICallError keeps the HTTP response: exceptions.py format_http_response_error)."""
    from google.api_core.exceptions import GoogleAPICallError

    try:
        return rpc(request=request, retry=None, timeout=TIMEOUT_S)
    except GoogleAPICallError as err:
        if err.response is None:
            raise ApiRefusal(int(err.code or 0), str(err.message), err.reason or "") from err
        raise refusal(err.response) from err


def read_or_none(rpc: Callable[..., Answer], request: Any) -> Answer | None:
    """`read`, but None where the resource does not exist (404)."""
    try:
        return read(rpc, request)
    except ApiRefusal as err:
        if err.status != 404:
            raise
        return None


class GoogleApi:
    """The deployment's GCP connection: its credentials in an authorized session, and typed
    clients on them."""

    def __init__(self, gcp_conn_id: str) -> None:
        from airflow.providers.google.common.hooks.base_google import GoogleBaseHook
        from google.auth.transport.requests import AuthorizedSession, Request

        self.credentials, self.project = GoogleBaseHook(
            gcp_conn_id=gcp_conn_id
        ).get_credentials_and_project_id()
        # no-untyped-call below: google-auth 2.63.0 leaves Credentials.refresh (credentials.py:
        # 161) and AuthorizedSession.__init__ (transport/requests.py:515) unannotated
        if not self.credentials.valid:
            # The token first, once: credentials that cannot get one (a token endpoint out of
            # reach, a revoked key) raise here, the `google credentials` line, instead of in
            # every check (AuthorizedSession.request calls credentials.before_request, which
            # refreshes a token that is not valid: google-auth 2.63.0, transport/requests.py
            # line 739, credentials.py lines 236-242).
            self.credentials.refresh(Request())  # type: ignore[no-untyped-call]
        self.session = AuthorizedSession(self.credentials)  # type: ignore[no-untyped-call]
        self._clients: dict[type, object] = {}

    def client(self, client_class: type[Answer], host: str) -> Answer:
        """A typed client (google.cloud.compute_v1's, resourcemanager_v3's) on the REST
        transport at the host's endpoint, with the connection's credentials; one per class."""
        client = self._clients.get(client_class)
        if not isinstance(client, client_class):
            client = self._clients[client_class] = client_class(  # type: ignore[call-arg]
                credentials=self.credentials,
                transport="rest",
                client_options={"api_endpoint": deployment.api_endpoint(host)},
            )
        return client

    def get(self, host: str, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """GET https://<host><path> (JSON), or ApiRefusal: for an API no lock pins a typed
        client of (Service Usage, Cloud Quotas)."""
        response = self.session.get(
            deployment.api_endpoint(host) + path, params=params, timeout=TIMEOUT_S
        )
        if response.status_code != 200:
            raise refusal(response)
        answer: dict[str, Any] = response.json()
        return answer

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

    def head(self, url: str, headers: dict[str, str]) -> Any:
        """HEAD `url` with the caller's token; the response, whatever its status."""
        return self.session.head(url, headers=headers, timeout=TIMEOUT_S, allow_redirects=True)
