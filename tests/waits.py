"""Waiting in tests for something another thread does (the emulator's controller, a process)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(predicate: Callable[[], Any], timeout: float = 5.0) -> Any:
    """The first truthy value of `predicate`, polled every 10 ms; AssertionError past `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := predicate():
            return result
        time.sleep(0.01)
    raise AssertionError("condition not reached in time")
