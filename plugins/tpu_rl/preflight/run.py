"""Runs every preflight check of a run (declared in tpu_rl.preflight.checks, in the order a run
would meet the problem) against the deployment's connections. Read-only: nothing is created or
changed."""

from __future__ import annotations

from functools import partial

from tpu_rl.layout import RunLayout
from tpu_rl.preflight.checks import CHECKS, Need, Reads
from tpu_rl.preflight.google_api import GoogleApi
from tpu_rl.preflight.result import CheckResult, failed, guarded, skipped

RETRY = "run preflight again; if it persists, check the API's status and the network"
CREDENTIALS = "google credentials"
CREDENTIALS_FIX = (
    "gcloud auth application-default login (the connection google-cloud-platform:// uses "
    "application-default credentials), or give the connection a service account key "
    "(keyfile_dict) or impersonation_chain"
)


def run_preflight(
    layout: RunLayout, gcp_conn_id: str | CheckResult, hf_token: str | CheckResult
) -> list[CheckResult]:
    """The results of every check (tpu_rl.preflight.checks) that applies to the run's
    settings, every one run that can be: a connection that could not be read (a failed
    CheckResult in place of its id or token) or Google credentials that cannot be had is one
    FAIL line, first, and the checks that need it are SKIPPED, saying why; so are those after
    a failed check whose passing they need (`gke standard`)."""
    google = _google_session(gcp_conn_id)
    connections = {Need.GOOGLE: google, Need.HF_TOKEN: hf_token}
    results = [got for got in connections.values() if isinstance(got, CheckResult)]
    # each Need not met: the name of the line that failed it
    missing = {need: got.name for need, got in connections.items() if isinstance(got, CheckResult)}
    api, conn = (None, "") if isinstance(google, CheckResult) else google
    reads = Reads(layout, api, conn, "" if isinstance(hf_token, CheckResult) else hf_token)
    for check in CHECKS:
        if not check.applies_to(layout.settings):
            continue
        lacking = [need for need in check.needs if need in missing]
        if lacking:
            why = f"needs {lacking[0].value} ({missing[lacking[0]]} failed)"
            ran = [skipped(check.name, why)]
        else:
            ran = guarded(check.name, RETRY, partial(check.run, reads))
        results += ran
        if check.gives and not all(r.passed for r in ran):
            missing[check.gives] = check.name
    return results


def _google_session(gcp_conn_id: str | CheckResult) -> tuple[GoogleApi, str] | CheckResult:
    """An authorized session on the connection's credentials, or the FAIL line saying why
    there is none (google.auth's DefaultCredentialsError without application-default
    credentials: its message and the fix, never its traceback)."""
    if isinstance(gcp_conn_id, CheckResult):
        return gcp_conn_id
    try:
        return GoogleApi(gcp_conn_id), gcp_conn_id
    except Exception as err:  # DefaultCredentialsError, a bad key file, a refused refresh
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return failed(
            CREDENTIALS,
            f"connection {gcp_conn_id!r}: {type(err).__name__}: {reason}",
            CREDENTIALS_FIX,
        )
