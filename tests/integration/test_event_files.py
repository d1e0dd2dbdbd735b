"""The TensorBoard event files followed incrementally against the GCS emulator: each read takes
only the bytes past the last one (a ranged download of the re-uploaded object), with
tensorboard's own reader, from the files the sandbox's GRPO client writes."""

from __future__ import annotations

import pytest
from airflow.providers.google.cloud.hooks import gcs as gcs_hooks

from sandbox.tensorboard_events import EventFile, file_version_event, scalar_event
from tpu_rl.rewards.event_files import EventFiles, file_epoch
from tpu_rl.watch.health import BOARD_TAGS, KL_TAG

BOARD = "gs://bucket/gemma4-26b/trained/run/tensorboard/"
NAME = "events.out.tfevents.1764410400.rl-train-0-0"
OLDER = "events.out.tfevents.1764400000.rl-train-0-0"  # an earlier attempt's pod


@pytest.fixture
def gcs(monkeypatch):
    from sandbox.cloud import GcsEmulator

    emulator = GcsEmulator()
    emulator.client().create_bucket("bucket")
    monkeypatch.setenv("AIRFLOW_CONN_C", '{"conn_type": "google_cloud_platform"}')
    monkeypatch.setattr(gcs_hooks.GCSHook, "get_conn", lambda hook: emulator.client())
    yield emulator
    emulator.stop()


def writer() -> EventFile:
    """A tensorboardX file as the sandbox's client starts it."""
    events = EventFile(NAME)
    events.add(file_version_event(1.0))
    return events


def add_steps(events: EventFile, steps: range, kl: float = 0.01) -> None:
    for step in steps:
        events.add(scalar_event(2.0, step, KL_TAG, kl))
        events.add(scalar_event(2.0, step, "actor/train/loss", 0.5))  # not a tag asked for
        events.add(scalar_event(2.0, step - 1, "rewards/train/score/max", 1.0))
        events.add(scalar_event(2.0, step - 1, "rewards/train/score/mean", 0.5))
        events.add(scalar_event(2.0, step - 1, "rewards/train/score/min", 0.0))


def flush(gcs, events: EventFile, name: str = NAME) -> bytes:
    """GCSRecordWriter's flush: the whole file uploaded again."""
    data = events.contents()
    gcs.write(BOARD + name, data)
    return data


def downloads(gcs) -> list[str]:
    return [r for r in gcs.traffic.requests if r.startswith("GET /download/")]


def test_each_read_takes_only_the_new_scalars_by_a_ranged_download(gcs):
    events = writer()
    add_steps(events, range(1, 11))
    first = flush(gcs, events)
    files = EventFiles(BOARD, "c")
    offsets, scalars = files.read({}, None, BOARD_TAGS)
    assert offsets == {NAME: len(first)}
    assert [s.step for s in scalars if s.tag == KL_TAG] == list(range(1, 11))
    assert {s.tag for s in scalars} == set(BOARD_TAGS)  # the loss is not asked for
    assert {s.source for s in scalars} == {NAME}
    add_steps(events, range(11, 21), kl=0.5)
    whole = flush(gcs, events)
    gcs.traffic.reset()
    offsets, scalars = files.read(offsets, None, BOARD_TAGS)
    assert offsets == {NAME: len(whole)}
    assert [(s.step, s.value) for s in scalars if s.tag == KL_TAG] == [
        (n, 0.5) for n in range(11, 21)
    ]
    assert len(downloads(gcs)) == 1
    files.close()


def test_nothing_new_downloads_nothing(gcs):
    events = writer()
    add_steps(events, range(1, 4))
    flush(gcs, events)
    files = EventFiles(BOARD, "c")
    offsets, _ = files.read({}, None, BOARD_TAGS)
    gcs.traffic.reset()
    assert files.read(offsets, None, BOARD_TAGS) == (offsets, [])
    assert downloads(gcs) == []  # a range from the object's end would be refused: 416
    files.close()


def test_a_rebuilt_reader_goes_on_from_the_saved_offsets(gcs):
    events = writer()
    add_steps(events, range(1, 6))
    flush(gcs, events)
    offsets, _ = EventFiles(BOARD, "c").read({}, None, BOARD_TAGS)
    add_steps(events, range(6, 9))
    flush(gcs, events)
    rebuilt = EventFiles(BOARD, "c")  # a triggerer restart: the offsets come from the Job
    _, scalars = rebuilt.read(offsets, None, BOARD_TAGS)
    assert [s.step for s in scalars if s.tag == KL_TAG] == [6, 7, 8]
    rebuilt.close()


def test_a_record_cut_at_the_object_s_end_is_read_once_whole(gcs):
    events = writer()
    add_steps(events, range(1, 3))
    whole = events.contents()
    gcs.write(BOARD + NAME, whole[:-7])  # the last record's crc is missing
    files = EventFiles(BOARD, "c")
    offsets, scalars = files.read({}, None, BOARD_TAGS)
    assert offsets[NAME] < len(whole) - 7  # whole records only
    assert (1, "rewards/train/score/min") not in {(s.step, s.tag) for s in scalars}
    gcs.write(BOARD + NAME, whole)
    offsets, scalars = files.read(offsets, None, BOARD_TAGS)
    assert offsets[NAME] == len(whole)
    assert [(s.step, s.tag) for s in scalars] == [(1, "rewards/train/score/min")]
    files.close()


def test_an_earlier_attempt_s_files_are_not_read(gcs):
    old = EventFile(OLDER)
    add_steps(old, range(1, 30), kl=9.0)
    flush(gcs, old, OLDER)
    events = writer()
    add_steps(events, range(21, 23))
    flush(gcs, events)
    files = EventFiles(BOARD, "c")
    offsets, scalars = files.read({}, file_epoch(NAME), BOARD_TAGS)
    assert set(offsets) == {NAME}
    assert {s.source for s in scalars} == {NAME}
    files.close()


def test_a_shorter_object_is_read_again_from_its_start(gcs):
    events = writer()
    add_steps(events, range(1, 10))
    flush(gcs, events)
    files = EventFiles(BOARD, "c")
    offsets, _ = files.read({}, None, BOARD_TAGS)
    replaced = writer()
    add_steps(replaced, range(1, 3))
    flush(gcs, replaced)
    offsets, scalars = files.read(offsets, None, BOARD_TAGS)
    assert offsets == {NAME: len(replaced.contents())}
    assert [s.step for s in scalars if s.tag == KL_TAG] == [1, 2]
    files.close()


def test_the_emulator_refuses_a_range_past_the_object_s_end_as_gcs_does(gcs):
    from google.api_core.exceptions import RequestRangeNotSatisfiable

    gcs.write(BOARD + NAME, b"0123456789")
    blob = gcs.client().bucket("bucket").blob("gemma4-26b/trained/run/tensorboard/" + NAME)
    assert blob.download_as_bytes(start=4) == b"456789"
    with pytest.raises(RequestRangeNotSatisfiable):
        blob.download_as_bytes(start=10)
