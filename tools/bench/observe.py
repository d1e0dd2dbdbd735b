"""Wall-clock times of what happens in the Kubernetes emulator, read from its change feed.

The emulator's own timestamps are whole seconds; a thread polling the change feed every few
milliseconds stamps each change with `time.time()` when it first sees it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sandbox.kube_emulator import KubeEmulator

TICK_S = 0.005


@dataclass(frozen=True)
class Change:
    at: float  # epoch seconds, at most TICK_S late (plus the GIL)
    type: str  # ADDED, MODIFIED, DELETED
    plural: str
    obj: dict[str, Any]

    @property
    def name(self) -> str:
        return self.obj["metadata"]["name"]

    @property
    def labels(self) -> dict[str, str]:
        return self.obj["metadata"].get("labels") or {}

    @property
    def phase(self) -> str | None:
        return (self.obj.get("status") or {}).get("phase")

    def has_condition(self, kind: str) -> bool:
        conditions = (self.obj.get("status") or {}).get("conditions") or []
        return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


class ChangeClock:
    """Records every change of the emulator's objects while in use (a context manager)."""

    def __init__(self, emu: KubeEmulator) -> None:
        self.emu = emu
        self.changes: list[Change] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-change-clock", daemon=True)

    def __enter__(self) -> ChangeClock:
        self._rv = self.emu.resource_version
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._read()

    def _loop(self) -> None:
        while not self._stop.wait(TICK_S):
            self._read()

    def _read(self) -> None:
        seen = time.time()
        for rv, type_, plural, obj in self.emu.changes_since(self._rv):
            self._rv = rv
            self.changes.append(Change(seen, type_, plural, obj))

    def first(self, plural: str, when: Callable[[Change], bool]) -> float:
        """When the first change of `plural` matching `when` was seen."""
        for change in self.changes:
            if change.plural == plural and when(change):
                return change.at
        raise LookupError(f"no {plural} change matched")
