"""A capacity ladder as the `capacity_ladder` setting writes it: rungs `mode@zone`, comma-separated,
tried in that order (what a rung does: tpu_rl.cluster.ladder)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tpu_rl.settings.choices import Capacity

RUNG = re.compile(r"(?P<mode>[a-z_]+)@(?P<zone>[a-z]+-[a-z]+\d+-[a-z])")
EXAMPLE = "reservation@us-east5-b, flex_start@us-east5-b, spot@us-east5-a"


@dataclass(frozen=True)
class Rung:
    """One way to get the slice: a capacity mode in a zone."""

    mode: Capacity
    zone: str

    def __str__(self) -> str:
        return f"{self.mode}@{self.zone}"


class LadderError(ValueError):
    """The ladder's text is not a list of `mode@zone` rungs."""


def parse_ladder(text: str) -> list[Rung]:
    """The rungs of `text` (comma-separated `mode@zone`), in order; [] for an empty text."""
    rungs, problems = [], []
    for i, part in enumerate(p.strip() for p in text.split(",")):
        if not part and not text.strip():
            continue
        match = RUNG.fullmatch(part)
        if not match:
            problems.append(f"rung {i + 1} {part!r} is not mode@zone (e.g. flex_start@us-east5-a)")
            continue
        try:
            mode = Capacity(match["mode"])
        except ValueError:
            modes = ", ".join(c.value for c in Capacity)
            problems.append(f"rung {i + 1} {part!r}: mode {match['mode']!r} is not one of {modes}")
            continue
        rungs.append(Rung(mode, match["zone"]))
    if problems:
        raise LadderError("; ".join(problems))
    return rungs
