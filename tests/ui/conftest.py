"""The page's tests: Airflow's metadata DB (tests/conftest.py's `airflow_db`), the auth manager
the api-server uses, and one api-server and one headless Chromium for this folder's tests.

`ui_server` is Airflow's api-server app on loopback (tests/ui/api_server.py), started once and
stopped when the worker leaves tests/ui (package scope): the tests write runs to the DB and
read them through it. `browser` is the one Chromium, handed to each test as a fresh profile
would be for that server (Chromium.reset: a blank page, no cookies or storage, the default
window) and left on a blank page after it. A module using them is in the xdist group
`ui-browser`, so that one worker starts them once.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator

import pytest

from tests.ui.api_server import api_server
from tests.ui.chromium import Chromium


@pytest.fixture(scope="session")
def auth_token(airflow_db) -> str:
    """A JWT of the simple auth manager's admin, as the UI's `_token` cookie carries."""
    os.environ.setdefault("AIRFLOW__API_AUTH__JWT_SECRET", secrets.token_hex(64))
    from airflow.api_fastapi.app import init_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    return init_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))


@pytest.fixture(scope="package")
def ui_server(airflow_db, auth_token) -> Iterator[str]:
    """The api-server's base URL (the auth manager initialised first, as the tests' token)."""
    with api_server() as base:
        yield base


@pytest.fixture(scope="package")
def _session_browsers(tmp_path_factory) -> Iterator[list[Chromium]]:
    """The Chromium of this folder's tests (a new one if it died), closed after them."""
    held: list[Chromium] = []
    yield held
    for browser in held:
        browser.close()


@pytest.fixture
def browser(_session_browsers, ui_server, tmp_path_factory) -> Iterator[Chromium]:
    """Left on a blank page after the test: no page of it asks the server anything meanwhile."""
    if not _session_browsers or not _session_browsers[0].alive():
        for dead in _session_browsers:
            dead.close()
        # 90 s per wait: with four xdist workers on two cores, Airflow's UI (a React app on
        # an API server in this process) once took over 30 s to show the Trigger button
        profile = tmp_path_factory.mktemp("chromium-profile")
        _session_browsers[:] = [Chromium(profile, timeout=90)]
    browser = _session_browsers[0]
    browser.reset(ui_server)
    yield browser
    if browser.alive():
        browser.call("Page.navigate", url="about:blank")


@pytest.fixture
def gcs(monkeypatch):
    """The sandbox's GCS emulator behind the deployment's Google connection: the seam the
    sandbox patches (Google credentials), the rest real google-cloud-storage traffic."""
    from airflow.providers.google.common.hooks.base_google import GoogleBaseHook
    from google.auth.credentials import AnonymousCredentials

    from sandbox.cloud import GcsEmulator

    emulator = GcsEmulator()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.host)
    monkeypatch.setenv(
        "AIRFLOW_CONN_GOOGLE_CLOUD_DEFAULT",
        json.dumps({"conn_type": "google_cloud_platform", "extra": {"project": "sandbox"}}),
    )
    monkeypatch.setattr(
        GoogleBaseHook,
        "get_credentials_and_project_id",
        lambda hook: (AnonymousCredentials(), "sandbox"),
    )
    yield emulator
    emulator.stop()
