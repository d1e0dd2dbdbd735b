"""The README's commands, run as a person runs them (the venv already exists)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

from tests.conftest import REPO

LOG = REPO / "tests" / "fixtures" / "logs"


def make(*args: str) -> subprocess.CompletedProcess:
    # -o: the venv stamp counts as up to date, so make does not reinstall while tests run
    return subprocess.run(
        ["make", "--no-print-directory", "-o", ".venv/.installed", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_make_plan_writes_the_plan(tmp_path):
    done = make("plan", "CONF=include/examples/tutorial.json", f"OUT={tmp_path}")
    assert done.returncode == 0, done.stderr
    steps = json.loads((tmp_path / "plan.json").read_text())["steps"]
    assert steps[0]["id"] == "validate" and steps[-1]["id"] == "promote"


def test_make_plan_rejects_a_bad_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"cluster_name": "UPPER"}')
    done = make("plan", f"CONF={bad}", f"OUT={tmp_path / 'out'}")
    assert done.returncode != 0 and "cluster_name:" in done.stderr


def test_make_rewards_prints_the_metrics():
    log = sorted(LOG.glob("*.log"))[0]
    done = make("rewards", f"LOG={log}")
    assert done.returncode == 0, done.stderr
    parsed = json.loads(done.stdout)
    assert set(parsed) == {"pre", "post", "intermediate"}


def test_make_help_lists_every_target():
    makefile = (REPO / "Makefile").read_text()
    phony = {t for line in re.findall(r"^\.PHONY: (.+)$", makefile, re.M) for t in line.split()}
    done = make("help")
    listed = {line.split()[0] for line in done.stdout.splitlines() if line.strip()}
    assert {"e2e", "chromium", "bench", "demo-ui", "clean", "lint", "test-fast"} <= phony
    assert listed == phony, phony ^ listed


LINT = [
    ".venv/bin/ruff check plugins dags sandbox tests tools",
    ".venv/bin/ruff format --check plugins dags sandbox tests tools",
    "PYTHONPATH=plugins .venv/bin/lint-imports --no-cache",
]


def lint_and_test_lines(stdout: str) -> list[str]:
    tools = ("ruff", "lint-imports", "pytest")
    return [line for line in stdout.splitlines() if any(tool in line for tool in tools)]


def test_make_test_runs_the_format_check_and_the_layers_before_the_suite():
    done = make("-n", "test")
    workers = re.search(r"^TEST_WORKERS \?= (\d+)$", (REPO / "Makefile").read_text(), re.M)
    assert workers, "the Makefile sets no TEST_WORKERS"
    assert lint_and_test_lines(done.stdout) == [
        *LINT,
        f".venv/bin/python -m pytest -q -n {workers[1]} --dist loadgroup --ignore=tests/trainer"
        " --ignore=tests/maxtext",
    ]


def test_make_test_fast_runs_the_format_check_and_the_layers_then_the_fast_tiers():
    done = make("-n", "test-fast")
    assert lint_and_test_lines(done.stdout) == [
        *LINT,
        '.venv/bin/python -m pytest -q -n 2 --dist loadgroup -m "unit or integration or dag"'
        " --ignore=tests/trainer --ignore=tests/maxtext",
    ]


def test_make_chromium_says_what_it_installs_as_root_before_apt_get(tmp_path):
    """With no chromium on PATH, as root: one line naming the packages, then apt-get."""
    calls = tmp_path / "apt-get.log"
    for name, body in {
        "id": "echo 0",
        "apt-get": f'echo "$*" >> {calls}',
    }.items():
        (tmp_path / name).write_text(f"#!/bin/bash\n{body}\n")
        (tmp_path / name).chmod(0o755)
    done = subprocess.run(
        [shutil.which("make"), "--no-print-directory", "chromium"],
        cwd=REPO,
        env={"PATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "chromium is missing: installing Debian's chromium as root"
        " (apt-get update; apt-get install -y chromium)"
    ]
    assert calls.read_text().splitlines() == ["update -qq", "install -y -qq chromium"]


def test_make_e2e_writes_its_report_where_asked():
    done = make("-n", "e2e", "REPORT=out/e2e.json")
    assert done.stdout.strip().splitlines()[-1] == (
        f"E2E_REPORT={REPO}/out/e2e.json .venv/bin/python -m pytest -q"
        " tests/e2e/test_scenarios.py tests/e2e/test_deployments.py tests/processes"
    )


def test_make_test_trainer_runs_the_trainer_tier_in_its_own_venv():
    """The real-trainer tier: CI runs it after test-compat; make test and test-fast leave it."""
    done = make("-n", "-o", ".venv-trainer/.installed", "test-trainer")
    assert done.stdout.strip().splitlines()[-1] == (
        ".venv/bin/python -m pytest -q -m trainer tests/trainer"
    )
    venv = make("-n", "-W", "requirements-trainer.lock", "venv-trainer").stdout
    assert "-m venv .venv-trainer" in venv and "-r requirements-trainer.lock" in venv


def test_make_test_maxtext_runs_the_maxtext_tier_in_its_own_python_312_venv():
    """The MaxText judge tier: CI runs it last; make test and test-fast leave it. A
    Python 3.12 that does not run is named, with how to get one, before anything is made."""
    done = make("-n", "-o", ".venv-maxtext/.installed", "test-maxtext")
    assert done.stdout.strip().splitlines()[-1] == (
        ".venv/bin/python -m pytest -q -m maxtext tests/maxtext"
    )
    venv = make("-n", "-W", "requirements-maxtext.lock", "venv-maxtext").stdout
    assert "-m venv .venv-maxtext" in venv and "-r requirements-maxtext.lock" in venv
    missing = make("-W", "requirements-maxtext.lock", "venv-maxtext", "PYTHON312=/no/python3.12")
    assert missing.returncode != 0
    assert missing.stdout.startswith("No working Python 3.12 (/no/python3.12)")
    assert "PYTHON312=/path/to/python3.12" in missing.stdout
    assert (REPO / ".ci" / "run").read_text().splitlines()[-1] == "make test-maxtext"
    ci = (REPO / ".ci" / "run").read_text().split()
    assert ci.index("test-trainer") > ci.index("test-compat")


def test_make_clean_removes_what_the_readme_says():
    done = make("-n", "clean")
    assert done.stdout.split() == [
        "rm",
        "-rf",
        ".venv",
        ".venv-compat",
        ".venv-trainer",
        ".venv-maxtext",
        ".airflow",
        "plan-out",
        "test-artifacts",
        ".pytest_cache",
        ".ruff_cache",
    ]


def test_make_lint_passes():
    done = make("lint")
    assert done.returncode == 0, done.stdout + done.stderr


def test_make_venv_without_python_311_says_what_to_install(tmp_path):
    """Exactly python3.11 is needed; a missing or other interpreter is named, with
    what to do, before anything is created."""
    missing = make("venv", "PYTHON=python3.99-missing", f"VENV={tmp_path / 'v'}")
    assert missing.returncode != 0
    assert "python3.99-missing is not on PATH: this project needs exactly Python 3.11" in (
        missing.stdout
    )
    assert "PYTHON=/path/to/python3.11" in missing.stdout
    other = tmp_path / "python3"
    other.write_text(
        '#!/bin/sh\nif [ "$1" = -c ]; then case "$2" in\n'
        "  *platform*) echo 3.12.1;; *) exit 1;; esac; fi\n"
    )
    other.chmod(0o755)
    wrong = make("venv", f"PYTHON={other}", f"VENV={tmp_path / 'v'}")
    assert wrong.returncode != 0 and "is Python 3.12.1, not 3.11" in wrong.stdout
    assert not (tmp_path / "v").exists()
