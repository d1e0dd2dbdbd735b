"""Kubernetes Events as the sandbox's simulated controllers (Job, scheduler, Kueue) post them."""

from __future__ import annotations

import time
import uuid
from typing import Any


def now() -> str:
    """The current time as Kubernetes writes it (RFC 3339, seconds, UTC)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def event(
    obj: dict[str, Any], reason: str, message: str, component: str, type_: str
) -> dict[str, Any]:
    """A v1 Event about `obj`, from the controller named `component`."""
    meta = obj["metadata"]
    stamp = now()
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{meta['name']}.{uuid.uuid4().hex[:16]}",
            "namespace": meta["namespace"],
        },
        "involvedObject": {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
        },
        "reason": reason,
        "message": message,
        "type": type_,
        "count": 1,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "source": {"component": component},
    }
