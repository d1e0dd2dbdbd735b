"""Where the reward wait is in the training (tpu_rl.watch.state): JSON-safe, an older saved
position read, the facts an ending event carries, a new container read from its start."""

from __future__ import annotations

import json

from tpu_rl.settings.choices import HealthAction
from tpu_rl.watch import health
from tpu_rl.watch.state import FollowState


def test_a_state_comes_back_from_its_json_as_it_was():
    state = FollowState(
        pod_uid="u1",
        restart_count=2,
        last_time="2027-01-01T00:00:00.123456789Z",
        seen_at_last_time=3,
        intermediate=[{"step": 5, "metrics": {"corr": 1.0}}],
        step_marks=[[5, 1.0]],
        saved=[5, 2.0],
        event_offsets={"events.out.tfevents.1": 120},
    )
    assert FollowState.from_dict(json.loads(json.dumps(state.as_dict()))) == state


def test_the_watchdogs_rules_come_back_typed_from_the_json_of_its_memory():
    rules = health.Rules.defaults(spike_factor=4.0, action=HealthAction.EXPORT_HEALTHY)
    state = FollowState(health=health.armed({"last": [3, 9.0]}, rules))
    back = FollowState.from_dict(json.loads(json.dumps(state.as_dict())))
    assert back == state and back.health is not None
    assert back.health["rules"] is not rules and back.health["rules"] == rules
    assert back.health["rules"].action is HealthAction.EXPORT_HEALTHY


def test_an_older_or_foreign_position_is_read_without_what_it_does_not_know():
    assert FollowState.from_dict(None) == FollowState()
    old = FollowState.from_dict({"pod_name": "p", "seen_at_last_time": ["h1", "h2"], "gone": 1})
    assert old.pod_name == "p" and old.seen_at_last_time == 2  # hashes then, a count now


def test_an_ending_event_carries_the_pre_line_evaluations_reach_and_backend():
    state = FollowState(
        pre={"corr": 0.1}, intermediate=[{"step": 5}], reached_step=7, backend_created="t"
    )
    assert state.attempt_facts() == {
        "pre": {"corr": 0.1},
        "intermediate": [{"step": 5}],
        "reached_step": 7,
        "backend_created": "t",
    }


def test_adopting_a_newer_state_keeps_the_one_shared_object():
    shared = FollowState(pod_name="a")
    newer = FollowState(pod_name="b", reward_lines=4)
    shared.adopt(newer)
    assert (shared.pod_name, shared.reward_lines) == ("b", 4) and shared is not newer


def test_a_new_container_is_read_from_its_first_line():
    state = FollowState(restart_count=0, container_id="c0", last_time="t", seen_at_last_time=2)
    state.start_container(1, "c1")
    assert (state.restart_count, state.container_id) == (1, "c1")
    assert (state.last_time, state.seen_at_last_time) == (None, 0)
