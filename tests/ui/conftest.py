"""The page's tests need Airflow's metadata DB and the auth manager the api-server uses."""

from __future__ import annotations

import os
import secrets

import pytest


@pytest.fixture(scope="session")
def airflow_db() -> None:
    from airflow.utils import db

    db.resetdb()


@pytest.fixture(scope="session")
def auth_token(airflow_db) -> str:
    """A JWT of the simple auth manager's admin, as the UI's `_token` cookie carries."""
    os.environ.setdefault("AIRFLOW__API_AUTH__JWT_SECRET", secrets.token_hex(64))
    from airflow.api_fastapi.app import init_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    return init_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin"))
