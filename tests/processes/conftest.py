"""One production-shaped deployment per xdist worker, shared by the scenarios of this folder that
run there, and stopped after the last of them: its five processes would otherwise idle beside the
worker's later tests (about 40% of a core on a 2-core machine)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.packaging.install import build_wheel, install_wheel
from tests.processes.deployment import (
    Deployment,
    harness_folder,
    product_root,
    running_deployment,
)
from tests.processes.postgres import missing


@pytest.fixture(scope="package")
def deployment() -> Iterator[Deployment]:
    if reason := missing():
        pytest.skip(reason)
    with harness_folder("tpu-rl-processes-") as folder, running_deployment(folder) as d:
        print(f"\nprocess harness start-up: {json.dumps(d.timings)}")
        yield d


@pytest.fixture(scope="session")
def composer_site(tmp_path_factory) -> Path:
    """The product's wheel (as `make dist` builds it) installed alone into an empty folder, as
    Composer installs a PyPI package: for processes without plugins/ on their path."""
    scratch, dist = tmp_path_factory.mktemp("wheel-source"), tmp_path_factory.mktemp("dist")
    wheel = build_wheel(product_root(), scratch, dist)
    return install_wheel(wheel, tmp_path_factory.mktemp("composer-site"))
