"""`make demo` as a person runs it: a whole DAG run on the in-process sandbox (about a minute)."""

from __future__ import annotations

import os
import re
import subprocess

from tests.conftest import REPO


def test_make_demo_is_quiet_live_and_ends_with_its_summary(tmp_path):
    log = tmp_path / "demo.log"
    done = subprocess.run(
        ["make", "--no-print-directory", "-o", ".venv/.installed", "demo"],
        cwd=REPO,
        env={**os.environ, "DEMO_LOG": str(log)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) < 48, done.stdout  # 21 tasks, the summary, each metric per step
    assert done.stderr == ""
    task_lines = [line.split() for line in lines if re.match(r"^ *\d+\.\ds  ", line)]
    tasks = [words[1] for words in task_lines]
    assert tasks[0] == "validate" and len(tasks) == len(set(tasks)) == 21
    # evaluate_champion skips: the sandbox deployment has no champion yet (its first run);
    # evaluate_heldout too: the tutorial's settings leave held-out evaluation off
    ended = {words[1]: words[2] for words in task_lines if words[-1] == "s"}
    assert len(ended) == 21 and ended.pop("evaluate_champion") == "skipped", ended
    assert ended.pop("evaluate_heldout") == "skipped", ended
    assert set(ended.values()) == {"success"}, ended
    summary = "\n".join(lines[lines.index(next(x for x in lines if "SUCCESS in" in x)) :])
    for label in ("rewards:", "gate:", "export:", "report:", "promoted:", "cleanup:", "full log:"):
        assert f"\n{label}" in f"\n{summary}", label
    assert "mean_reward pre 0.0821 -> post 0.1234" in summary
    assert "gate:     passed" in summary and "run-report.md" in summary
    assert "promoted: champion of this deployment since this run: gs://" in summary
    assert f"full log: {log}" in summary
    # what the terminal no longer shows went to the log
    assert "DagRun Finished" in log.read_text()
    assert "Marking run" not in done.stdout
