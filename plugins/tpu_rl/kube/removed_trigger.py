"""RemovedTrigger: wait in the triggerer until deleted objects are gone.

A resume after capacity loss deletes the lost attempt's training Job and Pathways JobSet
(Foreground: their pods first, each with its grace period) before it submits new ones under
the same names; that wait holds no worker slot.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import TriggerEvent

from tpu_rl.kube.async_client import AsyncKube, KubeApiError
from tpu_rl.kube.gke_trigger import GkeTrigger, connection_of

REMOVAL_TIMEOUT_S = 300  # how long deleted Jobs and JobSets may take to go (their pods' grace)


class RemovedTrigger(GkeTrigger):
    """Fires {"status": "success"} once none of `objects` ("Job x" -> its API path) exists,
    or {"status": "error", "message"} naming those left when `deadline` (epoch s) passes."""

    def __init__(
        self, *, objects: dict[str, str], deadline: float, poll_interval: float, **connection: Any
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Airflow: unannotated
        self.kwargs = {
            "objects": dict(objects),
            "deadline": deadline,
            "poll_interval": poll_interval,
            **connection,
        }

    @classmethod
    def for_operator(cls, operator: Any, objects: dict[str, str], **kw: Any) -> RemovedTrigger:
        """The trigger on a GKE operator's cluster and credentials."""
        return cls(objects=objects, **kw, **connection_of(operator))

    async def run(self) -> AsyncIterator[TriggerEvent]:
        k = self.kwargs
        while True:
            try:
                left = await self._left()
            except KubeApiError as error:
                if not error.transient and error.status != 401:
                    yield TriggerEvent({"status": "error", "message": f"Kubernetes API: {error}"})
                    return
                self.log.warning("Kubernetes API: %s; checking again later", error)
                left = list(k["objects"])
            if not left:
                yield TriggerEvent({"status": "success"})
                return
            remaining = k["deadline"] - time.time()
            if remaining <= 0:
                message = f"{' and '.join(left)} not deleted in time"
                yield TriggerEvent({"status": "error", "message": message})
                return
            await asyncio.sleep(min(k["poll_interval"], remaining))

    async def _left(self) -> list[str]:
        """The objects still there."""
        async with self.hook.get_conn() as client:
            api = AsyncKube(client)
            return [
                what
                for what, path in self.kwargs["objects"].items()
                if await api.get_optional(path)
            ]
