"""A deferred wait to its end, as Airflow runs it: a trigger fires once; after the reward
trigger's progress report (`tpu_rl.watch.progress.PROGRESS_EVENT`) the sensor writes the
progress and defers again with a new trigger from the report's state
(`WaitForRewardsSensor.report_progress`), so the bench does the same, in the same process."""

from __future__ import annotations

from typing import Any


async def until_end(trigger: Any, deferred: list[Any] | None = None) -> dict[str, Any]:
    """The first event of `trigger` that is not a progress report (the wait's end);
    `deferred` gets each trigger the wait defers on, the last one what a triggerer holds."""
    from tpu_rl.watch.progress import PROGRESS_EVENT

    while True:
        if deferred is not None:
            deferred.append(trigger)
        payload = None
        async for event in trigger.run():
            payload = event.payload
            break
        if payload is None:
            return {"status": "no event"}
        if payload.get("reason") != PROGRESS_EVENT:
            return payload
        _, kwargs = trigger.serialize()
        trigger = type(trigger)(**{**kwargs, "state": payload["state"]})
