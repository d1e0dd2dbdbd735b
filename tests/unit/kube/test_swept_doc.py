"""docs/operations.md's table of what the cleanup deletes, generated from the swept kinds
(tpu_rl.kube.swept_doc)."""

from __future__ import annotations

import pytest

from tests.conftest import REPO
from tpu_rl.kube.swept import SWEPT_KINDS, swept_kind
from tpu_rl.kube.swept_doc import END, START, api_of, swept_kinds_table, with_current_table

OPERATIONS = REPO / "docs" / "operations.md"


def test_the_operations_table_is_what_the_table_declares():
    """Generated: python -m tpu_rl.kube.swept_doc docs/operations.md."""
    text = OPERATIONS.read_text()
    assert swept_kinds_table() in text, "docs/operations.md's swept kinds are stale: regenerate"
    assert with_current_table(text) == text
    for order, swept in enumerate(SWEPT_KINDS, start=1):
        assert f"| {order} | {swept.kind} |" in text


def test_a_stale_table_is_replaced_and_the_text_around_it_kept():
    text = f"# Operations\n\n{START}\n| 1 | Pod | old |\n{END}\n\nAfter.\n"
    current = with_current_table(text)
    assert current == f"# Operations\n\n{swept_kinds_table()}\n\nAfter.\n"
    assert "| 1 | Pod | old |" not in current


def test_a_text_without_the_markers_is_refused():
    with pytest.raises(ValueError):
        with_current_table("no table here")


def test_the_api_column_names_the_group_and_version_the_core_api_only_its_version():
    assert api_of(swept_kind("jobs")) == "`batch/v1` `jobs`"
    assert api_of(swept_kind("secrets")) == "`v1` `secrets`"


def test_each_kind_is_a_row_in_deletion_order_with_its_propagation():
    rows = swept_kinds_table().splitlines()
    assert rows[0] == START and rows[-1] == END
    kinds = [row.split(" | ")[1] for row in rows if row[:3] in {f"| {n}" for n in range(1, 10)}]
    assert kinds == [k.kind for k in SWEPT_KINDS]
    assert any("`propagationPolicy=Foreground`" in row for row in rows if "| Job |" in row)
