"""Fixtures of the MaxText judge tier (`make test-maxtext`, marker `maxtext`: tests/conftest.py
TIERS marks every test of this folder, and `make test` and `make test-fast` leave it out).

The product's `validate` and MaxText 0.2.4's own code judge the same runs: every catalogue cell
with one and two slices, and GENERATED settings around them (tests/maxtext/judging.py). MaxText
runs in `.venv-maxtext` (Python 3.12, requirements-maxtext.lock; TPU_RL_MAXTEXT_PYTHON names
another python), once per session, in two processes side by side: the cells with their
ahead-of-time compiles, and the generated settings (config and meshes, about a second each). The
table of verdicts is written to test-artifacts/maxtext-judge.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.maxtext.judging import (
    REPO,
    Case,
    JudgeMissing,
    cell_cases,
    generated_cases,
    judge,
    judge_python,
    witness_cases,
)

REPORT = REPO / "test-artifacts" / "maxtext-judge.md"


@dataclass(frozen=True)
class Judged:
    """The cases and MaxText's verdicts on them."""

    cells: list[Case]
    generated: list[Case]
    verdicts: dict[str, dict[str, Any]]
    versions: dict[str, str]

    def maxtext_accepts(self, case: Case) -> bool:
        return bool(self.verdicts[case.id]["ok"])

    def refusal(self, case: Case) -> str:
        """Where and why MaxText refused the case."""
        v = self.verdicts[case.id]
        return f"{v['stage']}: {v['error']} ({v['where']})"


@pytest.fixture(scope="session")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Judged:
    """Every case judged by MaxText; a missing judge venv fails the test and says to make it."""
    try:
        python = judge_python()
    except JudgeMissing as missing:
        pytest.fail(str(missing), pytrace=False)
    cells, generated = cell_cases(), [*generated_cases(), *witness_cases()]
    answer = judge(python, [cells, generated], tmp_path_factory.mktemp("maxtext-judge"))
    found = Judged(cells, generated, answer["verdicts"], answer["versions"])
    write_report(found)
    return found


def _verdict(ok: bool) -> str:
    return "accepts" if ok else "refuses"


def write_report(j: Judged) -> None:
    """The verdicts as a Markdown table, for people (test-artifacts/ is not in git)."""
    versions = ", ".join(f"{name} {v}" for name, v in j.versions.items())
    lines = [
        f"# validate and MaxText on the catalogue's cells ({versions})",
        "",
        "| cell | slices | validate | MaxText | MaxText's mesh or refusal | compiled |",
        "|---|---|---|---|---|---|",
    ]
    for case in j.cells:
        v = j.verdicts[case.id]
        cell, slices = case.id.rsplit("x", 1)
        seen = v["trainer_mesh"] if v["ok"] else j.refusal(case)
        lines.append(
            f"| {cell} | {slices} | {_verdict(not case.problems)} | {_verdict(v['ok'])} | "
            f"{seen} | {v['compiled'] or ''} |"
        )
    agree = sum((not c.problems) == j.maxtext_accepts(c) for c in j.generated)
    lines += ["", f"Generated settings: {len(j.generated)}, judged alike: {agree}", ""]
    for case in j.generated:
        if (not case.problems) != j.maxtext_accepts(case):
            lines.append(
                f"- {case.id}: validate {case.problems or 'passes'}; MaxText "
                f"{'accepts' if j.maxtext_accepts(case) else j.refusal(case)}"
            )
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text("\n".join(lines) + "\n")
