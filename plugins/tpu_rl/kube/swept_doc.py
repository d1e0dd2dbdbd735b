"""docs/operations.md's table of what the cleanup deletes, generated from SWEPT_KINDS between
its markers; a test fails when it is stale.

Usage: python -m tpu_rl.kube.swept_doc docs/operations.md
"""

from __future__ import annotations

import sys
from pathlib import Path

from tpu_rl.kube.swept import SWEPT_KINDS, SweptKind

START = "<!-- swept-kinds:start (python -m tpu_rl.kube.swept_doc docs/operations.md) -->"
END = "<!-- swept-kinds:end -->"


def api_of(swept: SweptKind) -> str:
    group_version = f"{swept.group}/{swept.version}" if swept.group else swept.version
    return f"`{group_version}` `{swept.plural}`"


def swept_kinds_table() -> str:
    """The block between the markers: one row per swept kind, in the order they are deleted."""
    rows = [
        "What `cleanup_kubernetes`, the timeout callback and the janitor delete (the objects with",
        "the run's labels; for the janitor, this deployment's), in this order, declared once in",
        "`plugins/tpu_rl/kube/swept.py`:",
        "",
        "| order | kind | API | deleted with | why |",
        "|---|---|---|---|---|",
    ]
    for order, swept in enumerate(SWEPT_KINDS, start=1):
        policy = "the API server's default"
        if swept.propagation:
            policy = f"`propagationPolicy={swept.propagation}`"
        rows.append(f"| {order} | {swept.kind} | {api_of(swept)} | {policy} | {swept.why} |")
    return "\n".join([START, *rows, END])


def with_current_table(text: str) -> str:
    """The document with its block between the markers replaced by the current table."""
    start, end = text.index(START), text.index(END) + len(END)
    return text[:start] + swept_kinds_table() + text[end:]


if __name__ == "__main__":
    target = Path(sys.argv[1])
    target.write_text(with_current_table(target.read_text()))
    print(f"wrote the swept kinds' table in {target}")
