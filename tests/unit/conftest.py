"""Doubles the unit tests share."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tpu_rl import storage


class MemoryObject:
    """storage.JsonObject's double: a JSON value per GCS URI in a dict that outlives operators
    (as GCS outlives tries and processes)."""

    def __init__(self, objects: dict[str, str], uri: str) -> None:
        self.objects, self.uri = objects, uri

    def read(self) -> Any:
        return json.loads(self.objects[self.uri]) if self.uri in self.objects else None

    def write(self, value: Any) -> None:
        self.objects[self.uri] = json.dumps(value)


@pytest.fixture
def gcs_objects(monkeypatch) -> dict[str, str]:
    objects: dict[str, str] = {}
    monkeypatch.setattr(storage, "JsonObject", lambda uri, conn: MemoryObject(objects, uri))
    return objects
