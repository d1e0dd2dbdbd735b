"""GCS look-ups of the run's outputs (tpu_rl.storage) on a hook that answers from a list of
object names; GCS's own answers are tests/integration/test_storage.py's (the GCS emulator)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.api_core.exceptions import NotFound

from tpu_rl import storage

ACTOR = "gs://bucket/m/trained/rl-1/checkpoints/actor/"


class ListingHook:
    """GCSHook's list and exists over a set of object names of bucket `bucket`; the calls made."""

    def __init__(self, names: list[str]) -> None:
        self.names, self.calls = names, []

    def list(self, bucket: str, prefix: str, delimiter: str | None = None) -> list[str]:
        self.calls.append(("list", prefix))
        found = [n for n in self.names if n.startswith(prefix)]
        if delimiter is None:
            return found
        return sorted({prefix + n[len(prefix) :].split(delimiter, 1)[0] + delimiter for n in found})

    def exists(self, bucket: str, name: str) -> bool:
        self.calls.append(("exists", name))
        return bucket == "bucket" and name in self.names


@pytest.fixture
def hook(monkeypatch) -> ListingHook:
    made = ListingHook([])
    monkeypatch.setattr(storage, "_hook", lambda gcp_conn_id: made)
    return made


def step(number: int, committed: bool) -> list[str]:
    prefix = f"m/trained/rl-1/checkpoints/actor/{number}/"
    files = [f"{prefix}_CHECKPOINT_METADATA", f"{prefix}model_params/d/0"]
    return files + ([prefix + storage.COMMIT_FILE] if committed else [])


def test_the_step_folders_are_the_numbered_ones_ascending(hook):
    hook.names = step(100, False) + step(25, True) + ["m/trained/rl-1/checkpoints/actor/tmp/x"]
    assert storage.checkpoint_steps(ACTOR, "c") == [25, 100]
    assert hook.calls == [("list", "m/trained/rl-1/checkpoints/actor/")]


def test_the_newest_committed_step_and_the_newer_saves_cut_off(hook):
    hook.names = step(25, True) + step(50, True) + step(75, False) + step(100, False)
    assert storage.newest_committed_step(ACTOR, "c") == (50, [75, 100])
    exists = [name for call, name in hook.calls if call == "exists"]
    assert exists == [  # from the newest down, stopping at the first committed
        f"m/trained/rl-1/checkpoints/actor/{n}/commit_success.txt" for n in (100, 75, 50)
    ]


def test_no_committed_step_is_none_with_every_step_cut(hook):
    hook.names = step(10, False) + step(20, False)
    assert storage.newest_committed_step(ACTOR, "c") == (None, [10, 20])
    hook.names = []
    assert storage.newest_committed_step(ACTOR, "c") == (None, [])


def test_a_step_is_committed_once_its_commit_file_exists(hook):
    hook.names = step(25, True) + step(50, False)
    assert storage.step_committed(f"{ACTOR}25/", "c")
    assert storage.step_committed(f"{ACTOR}25", "c")
    assert not storage.step_committed(f"{ACTOR}50/", "c")


def test_an_export_lacking_its_config_weights_or_tokenizer_says_which(hook):
    export = "gs://bucket/m/hf-trained/rl-1/"
    prefix = "m/hf-trained/rl-1/"
    hook.names = [f"{prefix}config.json", f"{prefix}model-00001.safetensors"]
    assert storage.missing_export_files(export, "c") == ["tokenizer*"]
    hook.names = [f"{prefix}tokenizer.json", "m/hf-trained/rl-2/config.json"]
    assert storage.missing_export_files(export, "c") == ["config.json", "*.safetensors"]


class Blob:
    """A google.cloud.storage Blob's download and conditional upload, on one stored value."""

    def __init__(self, stored: dict[str, Any]) -> None:
        self.stored = stored
        self.generation: int | None = stored.get("generation")

    def download_as_bytes(self) -> bytes:
        if "data" not in self.stored:
            raise NotFound("no such object")
        self.generation = self.stored["generation"]
        return self.stored["data"]

    def upload_from_string(self, data: str, content_type: str, if_generation_match: int) -> None:
        assert content_type == "application/json"
        if if_generation_match != self.stored.get("generation", 0):
            raise RuntimeError("412 Precondition Failed")
        self.stored.update(data=data.encode(), generation=self.stored.get("generation", 0) + 1)
        self.generation = self.stored["generation"]


@pytest.fixture
def stored(monkeypatch) -> dict[str, Any]:
    value: dict[str, Any] = {}
    monkeypatch.setattr(storage, "_blob", lambda uri, gcp_conn_id: Blob(value))
    return value


def test_a_json_object_reads_none_until_written_then_its_value(stored):
    record = storage.JsonObject("gs://bucket/a.json", "c")
    assert record.read() is None and record.generation == 0
    record.write({"attempts": 1})
    assert json.loads(stored["data"]) == {"attempts": 1}
    assert storage.JsonObject("gs://bucket/a.json", "c").read() == {"attempts": 1}


def test_a_stale_writer_is_refused_and_a_fresh_one_is_not(stored):
    first, second = storage.JsonObject("u", "c"), storage.JsonObject("u", "c")
    first.read(), second.read()
    first.write({"by": "first"})
    with pytest.raises(RuntimeError, match="412"):
        second.write({"by": "second"})
    second.read()
    second.write({"by": "second"})
    assert json.loads(stored["data"]) == {"by": "second"}


def test_a_text_object_is_its_text_or_none(stored):
    assert storage.read_text("gs://bucket/report.md", "c") is None
    stored.update(data="# Report \xe9".encode(), generation=1)
    assert storage.read_text("gs://bucket/report.md", "c") == "# Report \xe9"
