"""Which position a rebuilt reward trigger starts from (tpu_rl.rewards.position)."""

from __future__ import annotations

import json
import logging

from tpu_rl.rewards.position import POSITION_ANNOTATION, SavedPosition
from tpu_rl.watch.state import FollowState

POD = {"pod_uid": "uid-1", "container_id": "containerd://a", "restart_count": 0}


def _job(state: FollowState) -> dict:
    text = json.dumps(state.as_dict())
    return {"metadata": {"annotations": {POSITION_ANNOTATION: text}}}


def _position() -> SavedPosition:
    return SavedPosition("ns", "job", logging.getLogger("test"))


def test_a_trigger_rebuilt_from_a_progress_reports_state_goes_on_from_the_jobs_later_position():
    """A wait that reported progress deferred again from its state; a triggerer restarted later
    rebuilds the trigger from that older state: the Job's position, further on, wins (else the
    lines between are read and logged again)."""
    older = FollowState(**POD, last_time="2026-12-05T03:00:00.000000001Z")
    saved = FollowState(**POD, last_time="2026-12-05T03:00:09Z", health={"last": [10, 9.0]})
    resumed = _position().resume(_job(saved), older)
    assert resumed is not None and resumed.last_time == saved.last_time
    assert resumed.health == {"last": [10, 9.0]}  # the watchdog's memory with it


def test_a_position_behind_the_followers_own_or_of_another_container_is_not_taken():
    newer = FollowState(**POD, last_time="2026-12-05T03:00:09Z")
    behind = FollowState(**POD, last_time="2026-12-05T03:00:00Z")
    assert _position().resume(_job(behind), newer) is None
    other = FollowState(
        **{**POD, "container_id": "containerd://b"}, last_time="2026-12-05T04:00:00Z"
    )
    assert _position().resume(_job(other), newer) is None


def test_a_follower_starting_from_nothing_takes_the_jobs_position():
    saved = FollowState(**POD, last_time="2026-12-05T03:00:09Z")
    assert _position().resume(_job(saved), FollowState()).last_time == saved.last_time
