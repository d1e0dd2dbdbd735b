"""The capacity ladder's example settings (include/examples/capacity-ladder.json) the ladder's
test modules share."""

from __future__ import annotations

import json

from sandbox.paths import REPO

EXAMPLE = REPO / "include" / "examples" / "capacity-ladder.json"
TWO_RUNGS = "reservation@us-east5-b, spot@us-east5-a"


def example() -> dict:
    """The example's settings."""
    return json.loads(EXAMPLE.read_text())
