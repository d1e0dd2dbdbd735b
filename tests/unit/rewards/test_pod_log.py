"""When the reward wait's position is worth saving (tpu_rl.rewards.pod_log.logged_since_asked):
after a reward line, a cut line or a finished save, not after every chunk. The log read itself:
tests/integration/test_reward_trigger.py."""

from __future__ import annotations

from tpu_rl.rewards.pod_log import logged_since_asked
from tpu_rl.watch.state import FollowState


def test_only_a_reward_line_a_cut_line_or_a_save_is_worth_a_save_of_the_position():
    state = FollowState()
    asked = logged_since_asked(state)
    assert asked() is False
    state.reached_step = 5  # a step line alone
    assert asked() is False
    state.reward_lines += 1
    assert asked() is True and asked() is False
    state.cut_lines += 1
    assert asked() is True
    state.saved = [5, 1.0]
    assert asked() is True
    state.saved = [5, 2.0]  # the same step
    assert asked() is False
