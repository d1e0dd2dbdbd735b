"""The training's TensorBoard event files in GCS, followed incrementally: the new scalars of each
read, with tensorboard's own reader (no hand-written TFRecord parser).

Where they are and how they grow:
MaxText's train_rl writes `<base_output_directory>/<run_name>/tensorboard/` (maxtext-v0.2.4
configs/types.py:4640-4645) through metrax's TensorboardBackend on tensorboardX's SummaryWriter
(metrax v0.2.4 src/metrax/logging/tensorboard_backend.py:49-64), one file per process start,
named `events.out.tfevents.<10-digit epoch of the writer's start>.<hostname>` (tensorboardX
2.6.5 event_file_writer.py:37-38, 103-104). On gs:// tensorboardX's GCSRecordWriter holds the
whole file and re-uploads it whole at each flush (record_writer.py:117-158): the object gets a
new generation, its bytes so far unchanged, so each read fetches only the bytes past the last
one with a ranged download (https://cloud.google.com/storage/docs/json_api/v1/objects/get:
`Range` on a media download).

Each object's new bytes are appended to a local file that tensorboard's RawEventFileLoader
follows (tensorboard 2.21.0 backend/event_processing/event_file_loader.py: `Load()` yields the
records past the last one and keeps a record cut at the end for the next call; without
TensorFlow, through tensorboard.compat's stub reader). Which bytes were consumed, in whole
records, is the caller's to save (`offsets`, JSON): a rebuilt reader starts a new local file at
that offset. An object shorter than what was read was replaced: it is read again from 0.

tensorboard is imported only here, when a read runs (in the triggerer or a poke), never when a
DAG file is parsed.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from collections.abc import Collection, Sequence
from typing import Any

from tpu_rl.layout import split_gcs_uri
from tpu_rl.rewards.held_log import Log
from tpu_rl.watch.core import Scalar

EVENTS_MARK = "events.out.tfevents."
_EPOCH = re.compile(r"events\.out\.tfevents\.(\d+)\.")
# A TFRecord frame around each record's data: its length (8 bytes) and the length's crc (4)
# before, the data's crc (4) after (tensorboard 2.21.0 compat/tensorflow_stub/
# pywrap_tensorflow.py, PyRecordReader_New.GetNext).
FRAME_BYTES = 16


def file_epoch(name: str) -> int | None:
    """The epoch second the writer of the event file `name` started, from its name."""
    found = _EPOCH.search(name)
    return int(found.group(1)) if found else None


class _Followed:
    """One event object followed through a local file: where the file starts in the object,
    how many bytes of it were fetched and how many were consumed in whole records."""

    def __init__(self, directory: str, start: int) -> None:
        from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader

        handle, self.path = tempfile.mkstemp(dir=directory, suffix=".tfevents")
        os.close(handle)
        self.fetched = self.consumed = start
        self.loader = RawEventFileLoader(self.path)

    def append(self, data: bytes) -> None:
        with open(self.path, "ab") as local:
            local.write(data)
        self.fetched += len(data)

    def records(self) -> list[bytes]:
        """The whole records appended since the last call."""
        records = list(self.loader.Load())
        self.consumed += sum(len(record) + FRAME_BYTES for record in records)
        return records

    def drop(self) -> None:
        os.unlink(self.path)


class EventFiles:
    """The event files under one `gs://.../tensorboard/` folder: `read` returns the new scalars
    of the wanted tags since the offsets given, and the offsets after them."""

    def __init__(
        self,
        directory_uri: str,
        gcp_conn_id: str,
        impersonation_chain: str | Sequence[str] | None = None,
        log: Log | None = None,
    ) -> None:
        self.bucket, self.prefix = split_gcs_uri(directory_uri.rstrip("/") + "/")
        self.gcp_conn_id, self.impersonation_chain = gcp_conn_id, impersonation_chain
        self.log = log or logging.getLogger(__name__)
        self._local: tempfile.TemporaryDirectory[str] | None = None
        self._storage: Any = None  # the GCS client, made at the first read
        self._followed: dict[str, _Followed] = {}

    def read(
        self, offsets: dict[str, int], since: float | None, tags: Collection[str]
    ) -> tuple[dict[str, int], list[Scalar]]:
        """The new scalars of `tags` in the event files whose writer started at or after
        `since` (epoch seconds: the attempt's; older files are an earlier attempt's), oldest
        file first, and each file's offset after them. Blocking: GCS over HTTP."""
        from google.cloud import storage

        client = self._client()
        bucket = client.bucket(self.bucket)
        blobs = client.list_blobs(bucket, prefix=self.prefix, delimiter="/")
        sizes = {
            blob.name[len(self.prefix) :]: int(blob.size or 0)
            for blob in blobs
            if blob.name[len(self.prefix) :].startswith(EVENTS_MARK)
        }
        names = [n for n in sizes if since is None or (file_epoch(n) or 0) >= int(since)]
        names.sort(key=lambda n: (file_epoch(n) or 0, n))
        moved, scalars = dict(offsets), []
        for name in names:
            followed = self._follow(name, offsets.get(name, 0), sizes[name])
            if sizes[name] > followed.fetched:
                blob = storage.Blob(self.prefix + name, bucket)
                followed.append(blob.download_as_bytes(start=followed.fetched, end=sizes[name] - 1))
            scalars += _scalars(followed.records(), name, tags)
            moved[name] = followed.consumed
        return moved, scalars

    def close(self) -> None:
        """Remove the local files."""
        self._followed.clear()
        if self._local is not None:
            self._local.cleanup()
            self._local = None

    def _follow(self, name: str, offset: int, size: int) -> _Followed:
        """The object's local follower, started again at `offset` when this one is elsewhere
        (a rebuilt reader) and at 0 when the object is shorter than what was fetched."""
        followed = self._followed.get(name)
        if followed is not None and followed.consumed != offset:
            followed.drop()
            followed = None
        if followed is not None and size < followed.fetched:
            self.log.warning("TensorBoard event file %s shrank: reading it again", name)
            followed.drop()
            followed = None
        if followed is None:
            start = offset if offset <= size else 0
            followed = self._followed[name] = _Followed(self._directory(), start)
        return followed

    def _directory(self) -> str:
        if self._local is None:
            self._local = tempfile.TemporaryDirectory(prefix="tpu-rl-tensorboard-")
        return self._local.name

    def _client(self) -> Any:
        from airflow.providers.google.cloud.hooks.gcs import GCSHook

        if self._storage is None:
            chain = self.impersonation_chain
            self._storage = GCSHook(
                gcp_conn_id=self.gcp_conn_id, impersonation_chain=chain
            ).get_conn()
        return self._storage


def _scalars(records: list[bytes], source: str, tags: Collection[str]) -> list[Scalar]:
    from tensorboard.compat.proto.event_pb2 import Event

    found = []
    for record in records:
        event = Event.FromString(record)
        for value in event.summary.value:
            if value.tag in tags and value.WhichOneof("value") == "simple_value":
                found.append(Scalar(value.tag, int(event.step), float(value.simple_value), source))
    return found
