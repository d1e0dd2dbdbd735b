"""The README's commands, run as a person runs them (the venv already exists)."""

from __future__ import annotations

import json
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
    assert steps[0]["id"] == "validate" and steps[-1]["id"] == "cleanup"


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
