"""tpu_rl.preflight.checks_doc: the generated lists of the checks are current."""

from __future__ import annotations

import pytest

from tests.conftest import REPO
from tpu_rl.preflight.checks_doc import TARGETS, with_current_blocks


@pytest.mark.parametrize("target", TARGETS)
def test_the_generated_lists_are_current(target):
    """Generated: python -m tpu_rl.preflight.checks_doc (at the repository's root)."""
    text = (REPO / target).read_text()
    assert "preflight-" in text and ":start (generated: " in text, target
    assert text == with_current_blocks(text), f"{target} is stale: regenerate it"
