"""Deleting what a reward wait that ended holds, at once: the backend JobSet (its TPUs), and
after a stop at a save the training Job. Best effort: the operator's steps delete them too."""

from __future__ import annotations

from tpu_rl.kube.async_client import AsyncKube
from tpu_rl.kube.shared_client import SharedClients
from tpu_rl.rewards.held_log import Log


async def delete_now(clients: SharedClients, what: str, path: str, gain: str, log: Log) -> None:
    """DELETE `path` (Foreground) and log what it gained; a failure is only logged."""
    try:
        async with clients.lease() as client:
            status = await AsyncKube(client).delete(path)
    except Exception as error:  # the backstops still delete it
        log.warning("Could not delete %s now: %s", what, error)
        return
    log.info("%s %s.", what, f"deleted: {gain}" if status < 300 else "was already gone")
