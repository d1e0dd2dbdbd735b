"""The bench follows a reward wait past its progress reports, as the sensor defers again
(tools/bench/redefer.py): before, its triggerer phases took the first report for the wait's end
and judged a run still training ('status': 'running')."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

from tools.bench.redefer import until_end
from tpu_rl.watch.progress import PROGRESS_EVENT


class ScriptedTrigger:
    """Fires one event per instance: a progress report until `reports` were made, then the end;
    each new instance is built from serialize()'s kwargs and the report's state."""

    built: list[dict[str, Any]] = []

    def __init__(self, *, reports: int, state: dict[str, Any] | None = None) -> None:
        self.reports, self.state = reports, state or {"seen": 0}
        ScriptedTrigger.built.append(self.state)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("tests.ScriptedTrigger", {"reports": self.reports, "state": self.state})

    async def run(self) -> AsyncIterator[SimpleNamespace]:
        seen = self.state["seen"]
        if seen < self.reports:
            state = {"seen": seen + 1}
            yield SimpleNamespace(payload={"reason": PROGRESS_EVENT, "state": state})
        else:
            yield SimpleNamespace(payload={"status": "success", "seen": seen})


async def test_the_wait_goes_on_from_each_reports_state_to_its_end():
    ScriptedTrigger.built = []
    end = await until_end(ScriptedTrigger(reports=2))
    assert end == {"status": "success", "seen": 2}
    assert ScriptedTrigger.built == [{"seen": 0}, {"seen": 1}, {"seen": 2}]
