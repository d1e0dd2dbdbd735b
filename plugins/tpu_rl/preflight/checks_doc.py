"""The lists of preflight checks, generated from their declaration (tpu_rl.preflight.checks)
between markers: the README's names, docs/operations.md's table and the `preflight` task's doc
(a constant of tpu_rl.operators.preflight, which the DAG's parse reads without importing the
checks and their clients). A test fails when one is stale.

Usage (at the repository's root): python -m tpu_rl.preflight.checks_doc
"""

from __future__ import annotations

import re
import sys
import textwrap
from itertools import groupby
from pathlib import Path

from tpu_rl import generated_blocks
from tpu_rl.generated_blocks import WIDTH, Block, html_comment
from tpu_rl.preflight.checks import CHECKS, Check

COMMAND = "python -m tpu_rl.preflight.checks_doc"
DECLARED_IN = "`plugins/tpu_rl/preflight/checks.py`"
NO_BREAK = "\u00a0"  # stands for a space textwrap must not break at, while it wraps
# The files holding a block, from the repository's root.
TARGETS = ("README.md", "docs/operations.md", "plugins/tpu_rl/operators/preflight.py")


def _when(check: Check) -> str:
    return f"`cluster_mode={check.cluster_mode.value}`" if check.cluster_mode else ""


def _fill(text: str, subsequent_indent: str = "") -> str:
    """`text` wrapped to WIDTH, never inside a `code span` (a check's name stays whole)."""
    spans = re.split(r"(`[^`]*`)", text)
    kept = "".join(s.replace(" ", NO_BREAK) if s.startswith("`") else s for s in spans)
    wrapped = textwrap.fill(
        kept, WIDTH, break_on_hyphens=False, subsequent_indent=subsequent_indent
    )
    return wrapped.replace(NO_BREAK, " ")


def names_text() -> str:
    """The README's block: the checks' names in the order they run."""
    groups = []
    for mode, same in groupby(CHECKS, key=lambda check: check.cluster_mode):
        names = ", ".join(f"`{check.name}`" for check in same)
        if mode:
            groups.append(f"with `cluster_mode={mode.value}` also {names}")
        else:
            groups.append(f"then {names}" if groups else names)
    return _fill(
        f"The checks, in the order they run (declared in {DECLARED_IN}): {'; '.join(groups)}."
    )


def table_text() -> str:
    """docs/operations.md's block: one row per check."""
    rows = [
        _fill(
            f"Declared in {DECLARED_IN}, in the order they run; a check lacking what it needs "
            "is `SKIPPED`, naming what failed."
        ),
        "",
        "| check | what it checks | what it reads | needs | the fix on `FAIL` |",
        "|---|---|---|---|---|",
    ]
    for check in CHECKS:
        needs = ", ".join(need.value for need in check.needs) or "nothing"
        if check.cluster_mode:
            needs += f"; only with {_when(check)}"
        rows.append(f"| `{check.name}` | {check.checks} | {check.reads} | {needs} | {check.fix} |")
    return "\n".join(rows)


def step_doc_text() -> str:
    """The operator's block: a Python constant, one Markdown bullet per check."""
    bullets = [
        _fill(
            f"- `{check.name}`{f' ({_when(check)})' if check.cluster_mode else ''}: {check.checks}",
            subsequent_indent="  ",
        )
        for check in CHECKS
    ]
    return 'CHECKS_DOC = """\n' + "\n".join(bullets) + '\n"""'


BLOCKS = (
    Block("preflight-names", html_comment, names_text),
    Block("preflight-table", html_comment, table_text),
    Block("preflight-step-doc", lambda marker: f"# {marker}", step_doc_text),
)


def with_current_blocks(text: str) -> str:
    """The file's text with each preflight block it holds regenerated between its markers."""
    return generated_blocks.with_current_blocks(text, BLOCKS, COMMAND)


if __name__ == "__main__":
    for target in map(Path, sys.argv[1:] or TARGETS):
        target.write_text(with_current_blocks(target.read_text()))
        print(f"wrote the preflight checks' list in {target}")
