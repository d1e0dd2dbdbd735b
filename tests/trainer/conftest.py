"""Fixtures of the real-trainer tier (`make test-trainer`, marker `trainer`: tests/conftest.py
TIERS marks every test of this folder, and `make test` and `make test-fast` leave it out).

Its whole DAG runs train with the real trainer: Tunix's GRPOLearner on its toy model, on CPU,
in the trainer venv (`make venv-trainer`; TPU_RL_TRAINER_PYTHON names another python), as the
training pod's process (sandbox.real_trainer.process). The seam's own tests need no JAX.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.harness import Sandbox
from sandbox.real_trainer.process import TrainerMissing, trainer_python


@pytest.fixture(scope="session")
def trainer() -> Path:
    """The trainer venv's python; a missing one fails the test and says to make it."""
    try:
        return trainer_python()
    except TrainerMissing as missing:
        pytest.fail(str(missing), pytrace=False)


@pytest.fixture
def sandbox(airflow_db, trainer: Path, tmp_path: Path) -> Iterator[Sandbox]:
    """A started sandbox for one whole run on the real trainer."""
    with Sandbox(tmp_path).up() as box:
        yield box


# The RL page's fixtures (tests/ui/conftest.py): one api-server and one headless Chromium, for
# the real fault shown on the page (test_real_fault_on_the_page.py)
from tests.ui.conftest import _session_browsers, auth_token, browser, ui_server  # noqa: E402, F401
