"""docker-compose.yaml's optional profile `lineage` (Marquez beside Airflow) and lineage being
off unless the person turns it on (docs/lineage-backends.md), checked without Docker: the file
as compose reads it, and the OpenLineage provider's own configuration functions on the
environment the Airflow containers would get."""

from __future__ import annotations

import json
import os
import re

import pytest
import yaml
from airflow.providers.openlineage import conf as ol_conf

from tests.conftest import REPO

LINEAGE_SERVICES = {"marquez", "marquez-db", "marquez-web"}
TRANSPORT = "AIRFLOW__OPENLINEAGE__TRANSPORT"
# Every setting that turns the provider on (conf.is_disabled) or off, and the legacy variables
OPENLINEAGE_VARIABLE = re.compile(r"^(AIRFLOW__OPENLINEAGE__|OPENLINEAGE)")


def services() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yaml").read_text())["services"]


def airflow_services() -> dict:
    return {name: s for name, s in services().items() if name.startswith("airflow-")}


def container_env(environment: dict, shell: dict[str, str]) -> dict[str, str]:
    """What a container gets from a service's `environment` mapping, as compose resolves it with
    `shell` as the variables of the shell that runs it: ${VAR} and ${VAR:-default} interpolated;
    a variable with no value passed from the shell when set there, otherwise left out."""

    def interpolate(value: str) -> str:
        pattern = r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}"
        parts = str(value).split("$$")
        resolved = (re.sub(pattern, lambda m: shell.get(m[1]) or m[2] or "", p) for p in parts)
        return "$".join(resolved)

    env = {}
    for name, value in environment.items():
        if value is None:
            if name in shell:
                env[name] = shell[name]
        else:
            env[name] = interpolate(value)
    return env


def readme_transport() -> tuple[dict, str]:
    """The transport the README's Lineage section sets, and its command."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Lineage") : text.index("\n## ", text.index("## Lineage") + 1)]
    (command,) = re.findall(rf"^{TRANSPORT}='([^']+)' \\\n\s+(.+)$", section, flags=re.M)
    return json.loads(command[0]), command[1]


def test_lineage_profile_starts_marquez_its_database_and_web_ui_with_pinned_images():
    all_services = services()
    profiled = {name for name, s in all_services.items() if "profiles" in s}
    assert profiled == LINEAGE_SERVICES
    for name in LINEAGE_SERVICES:
        assert all_services[name]["profiles"] == ["lineage"]
    api, db, web = (all_services[n] for n in ("marquez", "marquez-db", "marquez-web"))
    # one Marquez release for the API and the web UI; every pulled image has an explicit tag
    assert api["image"] == "marquezproject/marquez:0.51.1"
    assert web["image"] == "marquezproject/marquez-web:0.51.1"
    assert db["image"] == "postgres:14"  # Marquez's own docker-compose.yml
    for name, service in all_services.items():
        if "build" not in service:
            repository, _, tag = service["image"].rpartition(":")
            assert repository and tag and tag != "latest", name
    # the image's marquez.dev.yml connects to POSTGRES_HOST as marquez/marquez, database marquez
    assert api["environment"]["POSTGRES_HOST"] == "marquez-db"
    assert api["environment"]["MARQUEZ_CONFIG"] == "marquez.dev.yml"
    assert api["environment"]["SEARCH_ENABLED"] == "false"  # no OpenSearch here
    assert {db["environment"][k] for k in ("POSTGRES_USER", "POSTGRES_PASSWORD")} == {"marquez"}
    assert db["environment"]["POSTGRES_DB"] == "marquez"
    assert db["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    assert api["depends_on"] == {"marquez-db": {"condition": "service_healthy"}}
    assert "marquez-db-volume:/var/lib/postgresql/data" in db["volumes"]
    # the web UI finds the API on the compose network; only the UI is published, on loopback
    assert web["environment"]["MARQUEZ_HOST"] == "marquez"
    assert web["environment"]["MARQUEZ_PORT"] == api["environment"]["MARQUEZ_PORT"] == "5000"
    assert web["ports"] == [f"127.0.0.1:3000:{web['environment']['WEB_PORT']}"]
    assert "ports" not in api and "ports" not in db
    volumes = yaml.safe_load((REPO / "docker-compose.yaml").read_text())["volumes"]
    assert "marquez-db-volume" in volumes


def test_airflow_without_the_profile_needs_nothing_of_it():
    lineage = LINEAGE_SERVICES
    for name, service in airflow_services().items():
        assert not set(service.get("depends_on", {})) & lineage, name
        assert "profiles" not in service, name


@pytest.fixture
def no_openlineage_env(monkeypatch):
    """The test process's own OpenLineage settings removed, so only what is set here counts."""
    for name in list(os.environ):
        if OPENLINEAGE_VARIABLE.match(name):
            monkeypatch.delenv(name)
    return monkeypatch


def apply(monkeypatch, env: dict[str, str]) -> None:
    for name, value in env.items():
        if OPENLINEAGE_VARIABLE.match(name):
            monkeypatch.setenv(name, value)


def test_airflow_services_get_no_transport_unless_the_shell_sets_one(no_openlineage_env):
    for name, service in airflow_services().items():
        assert TRANSPORT in service["environment"], name
        assert service["environment"][TRANSPORT] is None, name  # passed from the shell, or unset
        env = container_env(service["environment"], shell={})
        assert not [k for k, v in env.items() if OPENLINEAGE_VARIABLE.match(k) and v], name
    # the provider itself, on that environment (conf.py caches nothing under pytest)
    env = container_env(airflow_services()["airflow-scheduler"]["environment"], shell={})
    apply(no_openlineage_env, env)
    assert ol_conf.transport() == {}
    assert ol_conf.is_disabled()


def test_an_empty_transport_is_off_too(no_openlineage_env):
    """A Compose that kept an unset pass-through variable empty (docker/compose#11740)."""
    no_openlineage_env.setenv(TRANSPORT, "")
    assert ol_conf.transport() == {}
    assert ol_conf.is_disabled()


def test_the_readme_command_sends_the_events_to_the_profiles_marquez(no_openlineage_env):
    transport, command = readme_transport()
    assert command == "docker compose --profile lineage up -d"
    api = services()["marquez"]["environment"]
    assert transport == {
        "type": "http",
        "url": f"http://marquez:{api['MARQUEZ_PORT']}",
        "endpoint": "api/v1/lineage",
    }
    shell = {TRANSPORT: json.dumps(transport)}
    for name, service in airflow_services().items():
        env = container_env(service["environment"], shell)
        assert json.loads(env[TRANSPORT]) == transport, name
    apply(
        no_openlineage_env,
        container_env(airflow_services()["airflow-triggerer"]["environment"], shell),
    )
    assert ol_conf.transport() == transport
    assert not ol_conf.is_disabled()
    assert ol_conf.namespace() == "default"  # the namespace the README says to pick in Marquez
