"""TPU capacity per zone and per mode on the simulated clock: stockout windows.

The fake gcluster (a subprocess) reads them from the file `$FAKE_CLOUD_CAPACITY`, with the
simulated time the harness writes there at every reconcile: a TPU node pool whose capacity mode
and zone are stocked out when it is created fails the deploy with GKE's own words, as a static
Spot or reservation pool does ("Node pool creation fails due to resource availability",
https://cloud.google.com/kubernetes-engine/docs/troubleshooting/node-pools).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

ENV = "FAKE_CLOUD_CAPACITY"


@dataclass(frozen=True)
class Stockout:
    """No `capacity` VMs in `zone` from `start` to `end` (simulated seconds; end None: never
    back)."""

    capacity: str
    zone: str
    start: float = 0.0
    end: float | None = None

    def covers(self, capacity: str, zone: str, now: float) -> bool:
        end = math.inf if self.end is None else self.end
        return (self.capacity, self.zone) == (capacity, zone) and self.start <= now < end


class ZoneCapacity:
    """The stockout windows, written with the simulated time for the fake gcluster to read."""

    def __init__(self, path: Path, clock: Callable[[], float]) -> None:
        self.path, self.clock = path, clock
        self.stockouts: list[Stockout] = []
        self.reconcile()

    def stock_out(self, capacity: str, zone: str, start: float = 0.0, end: float | None = None):
        self.stockouts.append(Stockout(capacity, zone, start, end))
        self.reconcile()

    def reconcile(self) -> None:
        """Write the windows and the time (atomically: gcluster may be reading)."""
        data = {"clock": self.clock(), "stockouts": [asdict(s) for s in self.stockouts]}
        partial = self.path.with_suffix(".tmp")
        partial.write_text(json.dumps(data))
        partial.replace(self.path)


def stocked_out(path: str, capacity: str, zone: str) -> bool:
    """Whether the file's windows cover `capacity` in `zone` at the file's time (the fake
    gcluster's question; False without a file)."""
    file = Path(path)
    if not path or not file.is_file():
        return False
    data = json.loads(file.read_text())
    windows = [Stockout(**s) for s in data.get("stockouts") or []]
    return any(w.covers(capacity, zone, data.get("clock", 0.0)) for w in windows)
