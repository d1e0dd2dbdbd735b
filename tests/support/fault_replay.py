"""The sandbox's GRPO client read by the training watch without a cluster, a bucket or a clock.

`replay` runs the client the e2e tier's training pod runs (sandbox.workloads.grpo_client_script,
with a fault of sandbox.training_curve.TrainingFaults) and feeds what the reward wait would read
to the watch's pure step, tpu_rl.watch.core.advance: each log line at its simulated time (at the
harness's time scale, so a rule's floor in wall seconds means what it meant in the whole run),
the new scalars of the TensorBoard event file at each of its flushes (one `BoardRead`), and a
silence past the stall floor when the client hangs (one `Quiet`). It stops at the first effect
that ends the wait, as the trigger stops training then: no save after it is made. The bucket is
a dict, so the checkpoint a stopped run keeps is tpu_rl.checkpoints.checkpoint_choice's own
choice over the saves committed by then (`healthy_checkpoint`). A whole run's verdict in
milliseconds.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from unittest.mock import patch

from sandbox.orbax_saves import COMMIT_FILE
from sandbox.pod_scripts import PodInfo
from sandbox.training_curve import TrainingFaults
from sandbox.workloads import grpo_client_script
from tpu_rl.watch import core, health
from tpu_rl.watch.state import FollowState

BASE = "gs://replay/gemma4-26b/trained/"
RUN = "rl"
CHECKPOINTS = f"{BASE}{RUN}/checkpoints/actor/"
TENSORBOARD = f"{BASE}{RUN}/tensorboard/"
INFO = PodInfo("tpu-rl", "rl-train-0-0-ab1cd", "rl-train-0", 0, 0, {})
TIME_SCALE = 0.001  # sandbox.harness.Sandbox.run's: a simulated minute is 0.06 wall seconds
T0 = 1_800_000_000.0
STAMP = "2026-12-04T12:00:00Z"


@dataclass
class Bucket:
    """The client's PodStorage over a dict: what the bucket holds."""

    objects: dict[str, bytes] = field(default_factory=dict)

    def write(self, info: PodInfo, uri: str, data: bytes) -> None:
        self.objects[uri] = data

    def read(self, info: PodInfo, uri: str) -> bytes:
        return self.objects[uri]

    def delete(self, info: PodInfo, uri: str) -> None:
        del self.objects[uri]

    def step_folders(self) -> list[int]:
        """The numbered step folders under the checkpoints folder, committed or not."""
        names = (uri[len(CHECKPOINTS) :].split("/")[0] for uri in self.objects)
        return sorted({int(n) for n in names if n.isdigit()})

    def committed(self, step_uri: str) -> bool:
        return f"{step_uri.rstrip('/')}/{COMMIT_FILE}" in self.objects

    def event_file(self) -> tuple[str, bytes] | None:
        found = [(u, d) for u, d in self.objects.items() if u.startswith(TENSORBOARD)]
        return found[-1] if found else None


@dataclass
class Replay:
    """What the watch did with the run: its last state, every effect, and the bucket then."""

    state: FollowState
    effects: list[core.Effect]
    bucket: Bucket
    rules: health.Rules

    def ended(self) -> dict[str, Any] | None:
        """The event that ended the wait (None: the client ran to its end unstopped)."""
        return next((e.event for e in self.effects if isinstance(e, core.End)), None)

    def anomaly(self) -> dict[str, Any]:
        event = self.ended()
        assert event is not None and event.get("reason") == "training_unhealthy", event
        return event["anomaly"]

    def warnings(self) -> list[str]:
        return [e.text for e in self.effects if isinstance(e, core.Say) and e.warning]

    def kept(self) -> tuple[int | None, str | None]:
        """The healthy checkpoint the wait keeps after the anomaly (step, folder), chosen by
        tpu_rl.checkpoints.checkpoint_choice over the bucket as the stop left it."""
        from tpu_rl import storage
        from tpu_rl.checkpoints.checkpoint_choice import healthy_checkpoint

        with (
            patch.object(storage, "checkpoint_steps", lambda uri, conn: self.bucket.step_folders()),
            patch.object(storage, "step_committed", lambda uri, conn: self.bucket.committed(uri)),
        ):
            return healthy_checkpoint(
                CHECKPOINTS, "google_cloud_default", self.anomaly()["anomaly_step"]
            )


def rules(**changes: Any) -> health.Rules:
    """The watchdog's rules at the run settings' defaults, with `changes` (Rules' fields)."""
    return health.Rules.defaults(**changes)


def replay(faults: TrainingFaults, watch: health.Rules | None = None, **client: Any) -> Replay:
    """Run the client (num_batches 100, a save every 10 steps, as the e2e health runs; `client`:
    more of grpo_client_script's arguments) under the watch with `watch` (the defaults)."""
    watch = watch or rules()
    bucket = Bucket()
    script = grpo_client_script(
        **{
            "base_output_directory": BASE,
            "run_name": RUN,
            "num_batches": 100,
            "checkpoint_period": 10,
            "faults": faults,
            "write_object": bucket,
            "event_clock": lambda: T0,
            **client,
        }
    )
    state, effects = FollowState(health=health.armed(None, watch)), list[core.Effect]()
    now, board_read = T0, 0
    for event in _events(script.steps, bucket):
        if isinstance(event, int | float):  # a sleep of the client
            now += event * TIME_SCALE
            continue
        if isinstance(event, str):
            event = core.LogLine(STAMP, now, event)
        elif event is None:  # the client hangs: the pod runs on, silent, past the stall floor
            event = core.Quiet(now + watch.stall_floor_s + TIME_SCALE)
        elif isinstance(event, tuple):  # the event file after a flush: its new records
            name, data = event
            scalars = tuple(_scalars(data[board_read:], name))
            board_read = len(data)
            if not scalars:
                continue
            event = core.BoardRead(scalars)
        state, more = core.advance(state, event)
        effects += more
        if core.ended(more) is not None:
            break
    return Replay(state, effects, bucket, watch)


def _events(steps: list[Any], bucket: Bucket) -> Iterator[Any]:
    """The client's steps as the watch's inputs: a sleep's seconds, each line's text, the event
    file's (name, bytes) after a call that changed them, None for a hang."""
    for step in steps:
        if step.action == "sleep":
            yield step.seconds
        elif step.action == "log":
            text = step.text() if callable(step.text) else step.text
            for line in text.splitlines():
                if line.strip():
                    yield line
        elif step.action == "call" and step.fn is not None:
            before = bucket.event_file()
            step.fn(INFO)
            after = bucket.event_file()
            if after is not None and after != before:
                yield after[0].rsplit("/", 1)[-1], after[1]
        elif step.action == "forever":
            yield None
            return
        elif step.action == "exit":
            return


def _scalars(records: bytes, source: str) -> Iterator[core.Scalar]:
    """The judged scalars of whole TFRecords (length, its CRC, data, the data's CRC), read
    with tensorboard's Event as tpu_rl.rewards.event_files reads them."""
    from tensorboard.compat.proto.event_pb2 import Event

    at = 0
    while at + 12 <= len(records):
        (size,) = struct.unpack("<Q", records[at : at + 8])
        event = Event.FromString(records[at + 12 : at + 12 + size])
        at += 12 + size + 4
        for value in event.summary.value:
            if value.tag in health.BOARD_TAGS and value.WhichOneof("value") == "simple_value":
                yield core.Scalar(value.tag, int(event.step), float(value.simple_value), source)
