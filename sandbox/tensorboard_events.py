"""TensorBoard event files as Tunix's metrics logger writes them on gs://: TFRecord
frames of `Event` protobufs holding scalar `Summary` values, re-uploaded whole on each flush.

Writer: metrax's TensorboardBackend (google/metrax v0.2.4 src/metrax/logging/tensorboard_backend.py:
49-64) on tensorboardX 2.6.5's SummaryWriter (lanpa/tensorboardX writer.py:264-271,
event_file_writer.py:37-38, 103-104, 195-219; record_writer.py:117-158 GCSRecordWriter: the whole
file kept in memory, uploaded whole at each flush). Scalars are `Summary.Value(tag, simple_value)`
(tensorboardX summary.py:163-166). Wire format: tensorboard's event.proto and summary.proto
(proto3: Event wall_time=1 double, step=2 int64, file_version=3 string, summary=5; Summary
value=1; Value tag=1 string, simple_value=2 float) and TFRecord framing (tensorflow
core/lib/io/record_writer.cc: uint64 length, masked crc32c of it, data, masked crc32c of it).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field

import google_crc32c

FILE_VERSION = "brain.Event:2"  # tensorboardX event_file_writer.py: the file's first event
CRC_MASK_DELTA = 0xA282EAD8  # tensorflow core/lib/hash/crc32c.h: Mask
FLUSH_SECS = 120.0  # tensorboardX SummaryWriter(flush_secs=120), metrax passes none
METRAX_MIN_FLUSH_S = 30.0  # metrax TensorboardBackend flush_interval_s


def masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: crc32c rotated right by 15 bits plus a constant (crc32c.h Mask)."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + CRC_MASK_DELTA) & 0xFFFFFFFF


def tfrecord(data: bytes) -> bytes:
    """One TFRecord frame around `data`."""
    length = struct.pack("<Q", len(data))
    return (
        length
        + struct.pack("<I", masked_crc32c(length))
        + data
        + struct.pack("<I", masked_crc32c(data))
    )


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        bits, value = value & 0x7F, value >> 7
        out.append(bits | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _field(number, 2) + _varint(len(payload)) + payload


def _float32(value: float) -> bytes:
    """`value` as a little-endian float32; beyond float32's range it is inf, as numpy casts."""
    try:
        return struct.pack("<f", value)
    except OverflowError:
        return struct.pack("<f", math.copysign(math.inf, value))


def scalar_event(wall_time: float, step: int, tag: str, value: float) -> bytes:
    """`Event{wall_time, step, summary{value{tag, simple_value}}}`, serialized (proto3: a zero
    step is not written)."""
    summary_value = _length_delimited(1, tag.encode()) + _field(2, 5) + _float32(value)
    summary = _length_delimited(1, summary_value)
    step_field = _field(2, 0) + _varint(step) if step else b""
    return _field(1, 1) + struct.pack("<d", wall_time) + step_field + _length_delimited(5, summary)


def file_version_event(wall_time: float) -> bytes:
    """The event a tensorboardX writer starts its file with."""
    return _field(1, 1) + struct.pack("<d", wall_time) + _length_delimited(3, FILE_VERSION.encode())


def event_file_name(epoch: float, hostname: str) -> str:
    """`events.out.tfevents.<10-digit epoch>.<hostname>` (tensorboardX
    event_file_writer.py:103-104)."""
    return f"events.out.tfevents.{int(epoch):010d}.{hostname}"


@dataclass
class EventFile:
    """One writer's file: its frames so far (Cloud Storage holds them as of the last flush)."""

    name: str
    buffered: bytearray = field(default_factory=bytearray)

    def add(self, event: bytes) -> None:
        self.buffered += tfrecord(event)

    def contents(self) -> bytes:
        """The whole file, as a flush uploads it (GCSRecordWriter re-uploads all it holds)."""
        return bytes(self.buffered)


@dataclass
class FlushClock:
    """When a writer's file reaches Cloud Storage, in simulated seconds since it started:
    tensorboardX's own flush every FLUSH_SECS, or metrax's at a step that is a multiple of
    `log_period` once METRAX_MIN_FLUSH_S passed since its last (metrax passes
    flush_every_n_steps=log_period: MaxText train_rl.py:459-461)."""

    log_period: int
    last_flush_s: float = 0.0
    last_metrax_flush_s: float = 0.0

    def due(self, now_s: float, step: int) -> bool:
        """Whether the scalars just added for `step` at `now_s` are flushed now (and note it)."""
        metrax = (
            step % self.log_period == 0 and now_s - self.last_metrax_flush_s >= METRAX_MIN_FLUSH_S
        )
        if metrax:
            self.last_metrax_flush_s = now_s
        if metrax or now_s - self.last_flush_s >= FLUSH_SECS:
            self.last_flush_s = now_s
            return True
        return False
