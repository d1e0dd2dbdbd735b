"""One production-shaped deployment per test session, shared by the scenarios in this folder."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.processes.deployment import Deployment, running_deployment
from tests.processes.postgres import missing


@pytest.fixture(scope="session")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    reason = missing()
    if reason:
        pytest.skip(reason)
    with running_deployment(tmp_path_factory.mktemp("processes")) as d:
        print(f"\nprocess harness start-up: {json.dumps(d.timings)}")
        yield d


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """All process scenarios share one deployment: one xdist worker runs them (--dist loadgroup)."""
    for item in items:
        if "tests/processes/" in str(item.path):
            item.add_marker(pytest.mark.xdist_group("processes"))
