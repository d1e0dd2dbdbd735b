"""The preflight checks declared once: the runner iterates the declaration,
skipping what lacks a need with why, and the README's list, docs/operations.md's table and the
`preflight` task's doc are generated from it; the result a frozen dataclass."""

from __future__ import annotations

from tests.conftest import REPO
from tpu_rl.operators.preflight import PreflightOperator
from tpu_rl.preflight.checks import CHECKS


def test_every_check_is_named_in_each_list():
    operations = (REPO / "docs" / "operations.md").read_text()
    readme = (REPO / "README.md").read_text()
    for check in CHECKS:
        assert f"`{check.name}`" in PreflightOperator.step_doc, check.name
        assert f"| `{check.name}` |" in operations, check.name
        assert f"`{check.name}`" in " ".join(readme.split()), check.name


def test_the_checks_have_one_name_each_and_what_the_docs_show():
    assert len({check.name for check in CHECKS}) == len(CHECKS)
    for check in CHECKS:
        assert check.checks and check.reads and check.fix and "|" not in check.checks, check
