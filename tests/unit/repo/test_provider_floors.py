"""Every Airflow provider tpu_rl and the DAG files import has a floor in pyproject.toml, the
compat lock pins that floor (so `make test-compat` runs on it) and the README's table names it;
the google/cncf-kubernetes pair that breaks imports is excluded; and the approval step builds
on a standard provider with and without `response_timeout`."""

from __future__ import annotations

import ast
import re
import tomllib
from datetime import timedelta
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests.conftest import REPO
from tpu_rl.operators import promotion

LINEAGE = "apache-airflow-providers-openlineage"


def provider_distribution(module: str) -> str:
    """The installed distribution of an `airflow.providers.*` module: apache-airflow-providers-
    followed by the longest prefix of its path that is one (`common.compat` -> common-compat)."""
    parts = module.split(".")[2:]
    for end in range(len(parts), 0, -1):
        name = "apache-airflow-providers-" + "-".join(parts[:end])
        try:
            metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        return name
    raise AssertionError(f"{module} belongs to no installed provider")


def imported_providers() -> set[str]:
    """The providers any module of tpu_rl or a DAG file imports, at its top or inside a function."""
    files = [*(REPO / "plugins" / "tpu_rl").rglob("*.py"), *(REPO / "dags").glob("*.py")]
    modules: set[str] = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                modules.add(node.module)
            elif isinstance(node, ast.Import):
                modules.update(alias.name for alias in node.names)
    return {provider_distribution(m) for m in modules if m.startswith("airflow.providers.")}


def declared(extra: str | None = None) -> dict[str, Requirement]:
    """pyproject.toml's dependencies, or those of an optional extra."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deps = project["optional-dependencies"][extra] if extra else project["dependencies"]
    return {r.name: r for r in map(Requirement, deps)}


def pinned(path: str) -> dict[str, str]:
    text = (REPO / path).read_text().split("# test tools")[0]
    return dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", text, flags=re.M))


def floor(requirement: Requirement) -> str:
    (lower,) = [s.version for s in requirement.specifier if s.operator == ">="]
    return lower


def test_the_optional_lineage_provider_is_an_extra_the_compat_lock_goes_without():
    """The OpenLineage provider is imported only inside the methods its listener calls
    (tpu_rl.operators.lineage): an extra, and make test-compat proves the package without it."""
    lineage = declared("lineage")
    assert set(lineage) == {LINEAGE} and LINEAGE in imported_providers()
    assert floor(lineage[LINEAGE]) == pinned("requirements.txt")[LINEAGE]
    assert LINEAGE not in pinned("requirements-compat.lock")


def test_every_imported_provider_has_a_floor_the_compat_lock_tests_and_the_readme_names():
    providers = imported_providers() - {LINEAGE}
    assert {"apache-airflow-providers-standard", "apache-airflow-providers-smtp"} <= providers
    deps, compat, lock = (
        declared(),
        pinned("requirements-compat.txt"),
        pinned("requirements-compat.lock"),
    )
    readme = (REPO / "README.md").read_text()
    table = readme[readme.index("## Supported versions") :].split("\n\n")[1].splitlines()
    columns = [c.strip() for c in table[0].strip("|").split("|")]
    floor_row = next(r for r in table if "`make test-compat`" in r)
    cells = dict(zip(columns, (c.strip() for c in floor_row.strip("|").split("|")), strict=True))
    for name in sorted(providers):
        assert name in deps, f"{name} is imported but pyproject.toml declares no floor"
        lowest = floor(deps[name])
        assert compat.get(name) == lowest, f"requirements-compat.txt: {name}=={lowest}"
        assert lock.get(name) == lowest, f"requirements-compat.lock: {name}=={lowest}"
        column = name.removeprefix("apache-airflow-providers-") + " provider"
        assert cells.get(column) == lowest, f"README table: {column} {lowest}"


def test_the_google_provider_that_needs_a_newer_cncf_kubernetes_is_excluded():
    """google 22.9.0 imports, in its GKE operators, what cncf-kubernetes has only from 10.22.0
    (apache/airflow PR #74505): the ranges must not admit 22.9+ with cncf-kubernetes < 10.22."""
    deps = declared()
    google = deps["apache-airflow-providers-google"].specifier
    cncf_floor = Version(floor(deps["apache-airflow-providers-cncf-kubernetes"]))
    newer_google = any(google.contains(v) for v in ("22.9.0", "22.10.0", "22.99.0"))
    assert not (newer_google and cncf_floor < Version("10.22.0"))
    assert google.contains("22.2.0") and google.contains("22.8.0")  # the tested pins stay in


def test_response_timeout_is_read_from_the_operators_signature():
    from airflow.providers.standard.operators.hitl import HITLOperator
    from airflow.sdk import BaseOperator

    class BeforeStandard1_12_2(BaseOperator):  # operators/hitl.py HITLOperator, 1.12.1
        def __init__(self, *, subject: str, options: list[str], **kwargs) -> None:
            super().__init__(**kwargs)

    assert not promotion.takes_response_timeout(BeforeStandard1_12_2)
    assert promotion.takes_response_timeout(HITLOperator)  # the pinned 1.21.0
    assert promotion.RESPONSE_TIMEOUT


def test_approval_builds_on_a_provider_with_response_timeout():
    op = promotion.ApproveExportOperator()
    assert op.response_timeout == timedelta(hours=24)  # approval_timeout_minutes' default


def test_approval_builds_on_a_provider_without_response_timeout(monkeypatch):
    """As on standard 1.12.1, whose HITLOperator.__init__ (operators/hitl.py) takes the
    arguments below and hands the rest to BaseOperator, which refuses one it does not know
    (TypeError at parse, even with approval=none): the approval must not pass
    `response_timeout` there; the answer's wait is then execution_timeout, RunStep's limit."""
    from airflow.providers.standard.operators.hitl import HITLOperator

    to_base_operator: dict = {}

    class Constructed(Exception):
        pass

    def before_1_12_2(
        self,
        *,
        subject,
        options,
        body=None,
        defaults=None,
        multiple=False,
        params=None,
        notifiers=None,
        assigned_users=None,
        **kwargs,
    ) -> None:
        to_base_operator.update(kwargs)
        raise Constructed

    monkeypatch.setattr(HITLOperator, "__init__", before_1_12_2)
    takes_it = promotion.takes_response_timeout(HITLOperator)
    monkeypatch.setattr(promotion, "RESPONSE_TIMEOUT", takes_it)

    with pytest.raises(Constructed):
        promotion.ApproveExportOperator()

    assert "response_timeout" not in to_base_operator
    assert to_base_operator["execution_timeout"] > timedelta(0)


def test_the_standard_floor_lacks_response_timeout_so_test_compat_runs_that_branch():
    lowest = floor(declared()["apache-airflow-providers-standard"])
    assert Version(lowest) < Version("1.12.2")
