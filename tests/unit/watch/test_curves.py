"""The training's curves for the RL page (tpu_rl.watch.curves): the tags kept, bounded by a
doubling stride, each tag's newest point, and the saves the log showed."""

from __future__ import annotations

import math
from typing import NamedTuple

from tpu_rl.watch import curves
from tpu_rl.watch.curves import KL, LOSS, MAX_POINTS, SAVES_KEPT


class Scalar(NamedTuple):
    """event_files.Scalar's fields that record reads."""

    tag: str
    step: int
    value: float


def test_only_the_curve_tags_and_finite_values_are_recorded():
    assert curves.record(None, [Scalar("other/tag", 1, 1.0), Scalar(LOSS, 1, math.nan)]) is None
    found = {"stride": 1, "series": {}, "last": {}}
    assert curves.record(found, [Scalar(KL, 2, math.inf)]) is found


def test_values_are_rounded_and_the_old_curves_are_never_changed():
    first = curves.record(None, [Scalar(LOSS, 1, 0.123456789)])
    assert first == {"stride": 1, "series": {LOSS: [[1, 0.123457]]}, "last": {LOSS: [1, 0.123457]}}
    second = curves.record(first, [Scalar(LOSS, 2, 2.0)])
    assert curves.points(second, LOSS) == [[1, 0.123457], [2, 2.0]]
    assert first["series"][LOSS] == [[1, 0.123457]]


def test_a_restarted_pod_repeating_its_steps_replaces_them():
    found = curves.record(None, [Scalar(LOSS, s, float(s)) for s in (1, 2, 3)])
    again = curves.record(found, [Scalar(LOSS, 2, 20.0)])
    assert curves.points(again, LOSS) == [[1, 1.0], [2, 20.0]]


def test_a_tag_past_max_points_doubles_the_stride_keeping_the_newest_point():
    steps = MAX_POINTS + 1
    found = curves.record(None, [Scalar(LOSS, s, 1.0) for s in range(1, steps + 1)])
    assert found is not None and found["stride"] == 2
    kept = found["series"][LOSS]
    assert len(kept) <= MAX_POINTS and all(step % 2 == 0 for step, _ in kept)
    assert curves.points(found, LOSS)[-1] == [steps, 1.0]  # odd, kept as the newest


def test_the_points_of_a_tag_never_seen_are_none():
    assert curves.points(None, LOSS) == [] and curves.points({"series": {}}, KL) == []


def test_a_save_is_kept_once_sorted_and_only_the_newest_saves():
    saved = curves.with_save(curves.with_save(None, 50), 25)
    assert saved["saves"] == [25, 50]
    assert curves.with_save(saved, 50)["saves"] == [25, 50]
    many = None
    for step in range(SAVES_KEPT + 5):
        many = curves.with_save(many, step)
    assert many["saves"] == list(range(5, SAVES_KEPT + 5))
