"""Stopping training after the last save that can finish before the capacity ends
(tpu_rl.rewards.save_stop): each save judged once, on the backend's nodes or an end known in
advance. When a node ends, and the pace: tests/unit/watch/test_capacity_end.py."""

from __future__ import annotations

import logging

import pytest

from tests.support.capacity_nodes import T0, marks, node
from tpu_rl.rewards import save_stop
from tpu_rl.watch.ends import WaitEnd
from tpu_rl.watch.state import FollowState

LOG = logging.getLogger(__name__)


class NodesOnly:
    """The one read judge_save makes of the cluster: the node list."""

    def __init__(self, nodes: list[dict]) -> None:
        self.nodes = nodes

    async def get_json(self, path: str, query: object = None) -> dict:
        return {"items": self.nodes}


@pytest.mark.asyncio
async def test_the_wait_goes_on_past_a_node_whose_end_is_not_a_date(caplog):
    """The trigger's judgment of a save read the annotation and crashed the wait."""

    state = FollowState(step_marks=marks((2, 0), (3, 60)), saved=[4, T0 + 90])
    pods = [{"spec": {"nodeName": "tpu-0"}}]
    api = NodesOnly([node("tpu-0", annotation="in a week")])
    assert await save_stop.judge_save(api, state, 4, None, pods, None, LOG) is None
    why = "node tpu-0: annotation node.gke.io/machine-termination-datetime: not an RFC 3339 "
    assert why + "date-time: 'in a week'" in caplog.text


@pytest.mark.asyncio
async def test_the_last_step_s_save_is_no_stop_the_total_coming_from_the_settings():
    """No log line carries the total steps (Tunix's has none), so the wait gets
    num_batches from the settings; the last step's save ends training, whatever the end."""

    def state() -> FollowState:
        return FollowState(step_marks=marks((2, 0), (3, 60)), saved=[4, T0 + 90])

    ending = T0 + 100  # the capacity ends 10 s after the save
    assert await save_stop.judge_save(NodesOnly([]), state(), 4, 4, [], ending, LOG) is None
    stop = await save_stop.judge_save(NodesOnly([]), state(), 4, 16, [], ending, LOG)
    assert stop is not None and (stop["reason"], stop["save_step"]) == (WaitEnd.CAPACITY_ENDING, 4)


def saved_at_4() -> FollowState:
    """Steps every 60 s, the save of step 4 finished at T0 + 90."""
    return FollowState(step_marks=marks((2, 0), (3, 60)), saved=[4, T0 + 90])


async def test_a_save_is_judged_once_and_no_save_is_not_judged():
    assert await save_stop.judge_save(NodesOnly([]), FollowState(), 4, None, [], T0, LOG) is None
    state = saved_at_4()
    first = await save_stop.judge_save(NodesOnly([]), state, 4, None, [], T0 + 100, LOG)
    assert first is not None and state.judged_save == 4
    assert await save_stop.judge_save(NodesOnly([]), state, 4, None, [], T0 + 100, LOG) is None


async def test_a_capacity_ending_far_after_the_next_save_goes_on():
    later = T0 + 10 * 24 * 3600
    assert await save_stop.judge_save(NodesOnly([]), saved_at_4(), 4, None, [], later, LOG) is None


async def test_the_stop_event_names_the_save_the_nodes_and_the_end():
    pods = [{"spec": {"nodeName": "tpu-0"}}, {"spec": {}}]
    api = NodesOnly([node("tpu-0", annotation="2027-01-15T08:00:00Z"), node("other")])
    stop = await save_stop.judge_save(api, saved_at_4(), 4, None, pods, None, LOG)
    assert stop is not None and stop["status"] == "error"
    assert (stop["save_step"], stop["nodes"]) == (4, ["tpu-0"])
    assert stop["ends_at"] == T0  # the node's end: T0 is 2027-01-15T08:00Z
    assert set(FollowState().attempt_facts()) <= set(stop)


async def test_an_end_known_in_advance_wins_when_it_comes_first():
    pods = [{"spec": {"nodeName": "tpu-0"}}]
    api = NodesOnly([node("tpu-0", annotation="2030-01-01T00:00:00Z")])
    assert await save_stop.slice_end(api, pods, T0, LOG) == (T0, ["tpu-0"])
    assert await save_stop.slice_end(NodesOnly([]), [], None, LOG) == (None, [])
