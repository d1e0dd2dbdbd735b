"""Blocks of a file regenerated between their marker lines (tpu_rl.generated_blocks)."""

from __future__ import annotations

from tpu_rl.generated_blocks import Block, html_comment, with_current_blocks

COMMAND = "python -m x"


def block(name: str, text: str) -> Block:
    return Block(name, html_comment, lambda: text)


def test_the_markers_name_the_block_and_the_command_that_writes_it():
    assert block("cells", "").markers(COMMAND) == (
        "<!-- cells:start (generated: python -m x) -->",
        "<!-- cells:end -->",
    )


def test_a_block_is_replaced_between_its_markers_and_the_rest_kept():
    start, end = block("cells", "").markers(COMMAND)
    text = f"head\n{start}\nold\nlines\n{end}\ntail\n"
    assert with_current_blocks(text, (block("cells", "new"),), COMMAND) == (
        f"head\n{start}\nnew\n{end}\ntail\n"
    )


def test_each_block_the_file_holds_is_regenerated_and_others_are_skipped():
    one, two = block("one", "1"), block("two", "2")
    s1, e1 = one.markers(COMMAND)
    s2, e2 = two.markers(COMMAND)
    text = f"{s1}\nx\n{e1}\nmiddle\n{s2}\ny\n{e2}\n"
    absent = block("absent", "never")
    current = with_current_blocks(text, (one, absent, two), COMMAND)
    assert current == f"{s1}\n1\n{e1}\nmiddle\n{s2}\n2\n{e2}\n"
    assert with_current_blocks(current, (one, two), COMMAND) == current


def test_a_marker_written_by_another_command_is_not_this_blocks():
    start, end = block("cells", "").markers("python -m other")
    text = f"{start}\nold\n{end}\n"
    assert with_current_blocks(text, (block("cells", "new"),), COMMAND) == text
