"""TensorBoard's event files as the reward wait reads them (tpu_rl.rewards.event_files): the
writer's start from a file's name, whole records only, the scalars of the tags asked for. The
reads from GCS: tests/integration/test_event_files.py."""

from __future__ import annotations

from sandbox.tensorboard_events import event_file_name, file_version_event, scalar_event, tfrecord
from tpu_rl.rewards.event_files import FRAME_BYTES, _Followed, _scalars, file_epoch
from tpu_rl.watch.core import Scalar


def test_a_files_writer_started_at_the_epoch_its_name_carries():
    assert file_epoch(event_file_name(1764410400, "rl-train-0-0")) == 1764410400
    assert file_epoch("gs://b/t/events.out.tfevents.0000000042.host.v2") == 42
    assert file_epoch("events.out.tfevents") is None and file_epoch("other.txt") is None


def test_only_whole_records_are_consumed_and_the_rest_waits_for_more_bytes(tmp_path):
    first = tfrecord(scalar_event(1.0, 1, "actor/train/kl", 0.5))
    second = tfrecord(scalar_event(2.0, 2, "actor/train/kl", 0.25))
    followed = _Followed(str(tmp_path), start=100)
    followed.append(first + second[:10])
    (record,) = followed.records()
    assert followed.consumed == 100 + len(first) and followed.fetched == 100 + len(first) + 10
    assert len(record) + FRAME_BYTES == len(first)
    followed.append(second[10:])
    assert len(followed.records()) == 1 and followed.consumed == followed.fetched
    assert followed.records() == []
    followed.drop()
    assert list(tmp_path.iterdir()) == []


def test_the_scalars_are_those_of_the_tags_asked_for():
    records = [
        scalar_event(1.0, 3, "actor/train/kl", 0.5),
        scalar_event(1.0, 3, "actor/train/loss", 2.0),
        file_version_event(0.0),
    ]
    found = _scalars(records, "gs://b/events", {"actor/train/kl"})
    assert found == [Scalar("actor/train/kl", 3, 0.5, "gs://b/events")]
