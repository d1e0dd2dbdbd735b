"""The package's import rules (pyproject.toml's [tool.importlinter] contracts, which `make lint`
runs): they hold on the tree, and they fail when a lower layer imports a higher one, when a new
top-level room has no layer, when the package imports the test world, and when the modules of
one package import each other in a circle (an import inside a function counts: it still ties
the two modules together)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
CONFIG = REPO / "pyproject.toml"


def lint_imports(plugins: Path) -> subprocess.CompletedProcess:
    """`make lint`'s lint-imports, on the tpu_rl package under `plugins`."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(CONFIG), "--no-cache"],
        cwd=plugins,
        env={**os.environ, "PYTHONPATH": str(plugins)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def plugins_copy(tmp_path: Path) -> Path:
    """A copy of plugins/tpu_rl to break."""
    shutil.copytree(
        REPO / "plugins" / "tpu_rl",
        tmp_path / "tpu_rl",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return tmp_path


def test_the_package_keeps_its_layers():
    done = lint_imports(REPO / "plugins")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 4 kept, 0 broken." in done.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # the cost estimate back in the settings' Params (the form's: tpu_rl.dag.params)
        (
            "settings/params.py",
            "from tpu_rl.report.estimate import estimate_run",
            "tpu_rl.settings is not allowed to import tpu_rl.report",
        ),
        # Kubernetes access reading a Job manifest (kueue checks are the backend's)
        (
            "kube/kueue_rules.py",
            "from tpu_rl.jobs import manifests",
            "tpu_rl.kube is not allowed to import tpu_rl.jobs",
        ),
        # the reward wait's shells reading the DAG's wiring (layer 3 up to layer 2)
        (
            "rewards/poll.py",
            "from tpu_rl.dag import limits",
            "tpu_rl.rewards is not allowed to import tpu_rl.dag",
        ),
        # the package shipping a piece of the sandbox, where it runs or not
        (
            "kube/objects.py",
            "def emulator():\n    import sandbox.kube_emulator",
            "tpu_rl is not allowed to import sandbox",
        ),
        (
            "report/run_note.py",
            "from tests.support import fault_replay",
            "tpu_rl is not allowed to import tests",
        ),
        # the watch core reads nothing itself: no client, even one imported where it runs
        (
            "watch/core.py",
            "from tpu_rl.kube.async_client import AsyncKube",
            "tpu_rl.watch is not allowed to import tpu_rl.kube",
        ),
        (
            "training_log/lines.py",
            "def read():\n    import aiohttp",
            "tpu_rl.training_log is not allowed to import aiohttp",
        ),
    ],
)
def test_an_import_up_the_layers_breaks_the_contract(plugins_copy, module, line, broken):
    path = plugins_copy / "tpu_rl" / module
    path.write_text(f"{path.read_text()}\n{line}\n")
    done = lint_imports(plugins_copy)
    assert done.returncode != 0
    assert broken in done.stdout, done.stdout + done.stderr


def test_a_new_top_level_room_needs_a_layer(plugins_copy):
    (plugins_copy / "tpu_rl" / "unplaced.py").write_text('"""A room no layer names."""\n')
    done = lint_imports(plugins_copy)
    assert done.returncode != 0
    assert "tpu_rl.unplaced" in done.stdout + done.stderr


def test_a_circle_inside_a_package_breaks_the_contract(plugins_copy):
    """cluster.climb imports cluster.ladder; ladder importing climb, where a function runs, closes
    a circle that no layer sees."""
    path = plugins_copy / "tpu_rl" / "cluster" / "ladder.py"
    path.write_text(
        f"{path.read_text()}\n\ndef _climb():\n    from tpu_rl.cluster import climb\n\n"
        "    return climb\n"
    )
    done = lint_imports(plugins_copy)
    assert done.returncode != 0
    assert "No cycles are allowed in tpu_rl.cluster." in done.stdout, done.stdout + done.stderr
