"""Why a sandbox run failed, for an assertion message: the waits' events, the logs' errors.

dag.test keeps no task log, so the deferred waits' events are recorded as they come.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from typing import Any
from unittest import mock


def error_lines(log: str, last: int = 12) -> list[str]:
    """The task logs' last error lines and exception messages, shortened: why a run failed,
    for an assertion message (the emulators' own "not found" lines left out)."""
    wanted = re.compile(r'\[error|"level": ?"error"|"exc_value"|^[\w.]+(Error|Exception|Timeout): ')
    noise = re.compile(r"gcp_storage_emulator")
    found = [line[:400] for line in log.splitlines() if wanted.search(line)]
    return [line for line in found if not noise.search(line)][-last:]


@contextlib.contextmanager
def recording_trigger_events(events: list[dict[str, Any]]) -> Iterator[None]:
    """Append each trigger event dag.test gets (its payload, the task's id and `fired_at`, the
    wall-clock epoch it reached the task) to `events`."""
    from airflow.sdk.execution_time.supervisor import InProcessTestSupervisor

    run_inline = InProcessTestSupervisor.run_trigger_in_process.__func__

    def recorded(cls: type, *, trigger: Any, ti: Any) -> Any:
        event = run_inline(cls, trigger=trigger, ti=ti)
        payload = event.payload if event else None
        fields = payload if isinstance(payload, dict) else {"payload": payload}
        events.append({"task_id": ti.task_id, **fields, "fired_at": time.time()})
        return event

    recording = classmethod(recorded)
    with mock.patch.object(InProcessTestSupervisor, "run_trigger_in_process", recording):
        yield
