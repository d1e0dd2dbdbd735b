"""When the capacity ends and whether training stops at the save just made
(tpu_rl.rewards.capacity_end), and the follower's marks of steps and saves."""

from __future__ import annotations

import logging

import pytest

from tpu_rl.rewards import capacity_end
from tpu_rl.rewards.follower import FollowState, Line, Resent, consume

T0 = 1_800_000_000.0
LOG = logging.getLogger(__name__)


def node(name: str, annotation: str | None = None, label: str | None = None) -> dict:
    meta: dict = {"name": name, "creationTimestamp": "2027-01-15T08:00:00Z"}
    if annotation:
        meta["annotations"] = {capacity_end.TERMINATION_ANNOTATION: annotation}
    if label:
        meta["labels"] = {capacity_end.MAX_RUN_LABEL: label}
    return {"metadata": meta}


def test_a_node_ends_at_its_termination_annotation_else_creation_plus_max_run():
    annotated = node("a", annotation="2027-01-22T08:00:00Z", label="3600")
    assert capacity_end.node_end(annotated) == capacity_end.epoch("2027-01-22T08:00:00Z")
    labelled = node("b", label="604800")
    assert capacity_end.node_end(labelled) == capacity_end.epoch("2027-01-15T08:00:00Z") + 604800
    assert capacity_end.node_end(node("c")) is None


def test_the_slice_ends_with_its_earliest_node_and_names_the_nodes_that_end():
    nodes = [
        node("a", annotation="2027-01-22T08:00:00Z"),
        node("b", annotation="2027-01-21T08:00:00Z"),
        node("other", annotation="2027-01-16T08:00:00Z"),  # not the slice's
        node("d"),
    ]
    ends = capacity_end.slice_end(nodes, {"a", "b", "d"})
    assert ends.at == capacity_end.epoch("2027-01-21T08:00:00Z")
    assert ends.nodes == ["a", "b"]
    assert capacity_end.slice_end(nodes, {"d"}) == capacity_end.SliceEnd(None, [], [])


def marks(*steps: tuple[int, float]) -> list[list[float]]:
    return [[s, T0 + at] for s, at in steps]


def test_the_pace_is_the_longest_step_gap_without_its_save_and_the_save_s_own_time():
    # steps every 60-70 s, step 4's save takes 30 s before step 5 (period 4)
    m = marks((2, 60), (3, 130), (4, 190), (5, 280))
    pace = capacity_end.measured_pace(m, [4, T0 + 220], period=4)
    assert pace == capacity_end.Pace(step_s=70, save_s=30)
    # a save every step: each gap less the save's time
    every = capacity_end.measured_pace(marks((4, 190), (5, 300)), [4, T0 + 220], 1)
    assert every == capacity_end.Pace(step_s=80, save_s=30)
    assert capacity_end.measured_pace(marks((5, 280)), [4, T0 + 220], 4) is None


@pytest.mark.parametrize(
    ("ends_in", "stops"),
    [
        (4 * 60 + 30 + 60 + 1, False),  # room for 4 steps, the save and a step's margin
        (4 * 60 + 30 + 60 - 1, True),
    ],
)
def test_it_stops_when_the_next_save_cannot_finish_a_step_before_the_end(ends_in, stops):
    pace = capacity_end.Pace(step_s=60, save_s=30)
    assert capacity_end.must_stop(T0, pace, period=4, ends_at=T0 + ends_in) is stops


def stamped(at: float, text: str) -> Line:
    from datetime import UTC, datetime

    stamp = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return Line(f"{stamp} {text}")


def test_the_follower_marks_step_lines_and_orbax_s_finished_save_line():
    state = FollowState()
    lines = [
        stamped(T0 + 60, "I1201 rl_cluster.py:573] Train step 1/8 done"),
        stamped(T0 + 120, "I1201 rl_cluster.py:573] Train step 2/8 done"),
        stamped(
            T0 + 150,
            "I1201 checkpoint_manager.py:2049] [process=0][thread=MainThread][step=2] "
            "Finished synchronous save.",
        ),
        stamped(T0 + 155, "W1201 train_rl.py:702] Intermediate Eval (step=2): corr=1"),
    ]
    assert consume(state, lines, Resent(), LOG) is None
    assert state.step_marks == [[1, T0 + 60], [2, T0 + 120]]
    assert state.saved == [2, T0 + 150]
    assert state.reached_step == 2
    many = [stamped(T0 + 200 + i, f"Train step {3 + i}/99 done") for i in range(10)]
    consume(state, many, Resent(), LOG)
    assert len(state.step_marks) == capacity_end.MARKS_KEPT
    assert state.step_marks[-1] == [12, T0 + 209]


def test_an_rfc_3339_annotation_in_lower_case_is_read():
    """Issue 43: RFC 3339 section 5.6 allows "t" and "z"; the annotation crashed the check."""
    lower = node("a", annotation="2027-01-22t08:00:00.5z")
    assert capacity_end.node_end(lower) == capacity_end.epoch("2027-01-22T08:00:00Z") + 0.5
    offset = node("b", annotation="2027-01-22T09:00:00+01:00")
    assert capacity_end.node_end(offset) == capacity_end.epoch("2027-01-22T08:00:00Z")


@pytest.mark.parametrize("value", ["abc", "2027-01-22", "2027-13-22T08:00:00Z", "1800000000"])
def test_a_node_whose_end_is_not_a_date_is_skipped_and_named(value):
    """Issue 43: GKE copies the VM's terminationTimestamp as is: a value that is no RFC 3339
    date-time is skipped (the node counts as not known to end), named in one line."""
    nodes = [node("bad", annotation=value), node("good", annotation="2027-01-22T08:00:00Z")]
    ends = capacity_end.slice_end(nodes, {"bad", "good"})
    assert ends.at == capacity_end.epoch("2027-01-22T08:00:00Z") and ends.nodes == ["good"]
    [why] = ends.unreadable
    assert why.startswith("node bad: annotation node.gke.io/machine-termination-datetime: ")
    assert repr(value) in why and "\n" not in why


def test_steps_logged_out_of_order_give_no_pace():
    """Issue 43: step 3's line stamped before step 2's gave a negative step time, so the drain
    before a capacity end put the next save in the past."""
    backwards = marks((2, 120), (3, 60))
    assert capacity_end.measured_pace(backwards, [2, T0 + 130], period=4) is None
    mixed = marks((1, 0), (2, 120), (3, 60), (4, 190))
    pace = capacity_end.measured_pace(mixed, [2, T0 + 130], period=4)
    assert pace is not None and pace.step_s == 130  # 3 -> 4; 2 -> 3 went backwards


class NodesOnly:
    """The one read judge_save makes of the cluster: the node list."""

    def __init__(self, nodes: list[dict]) -> None:
        self.nodes = nodes

    async def get_json(self, path: str, query: object = None) -> dict:
        return {"items": self.nodes}


@pytest.mark.asyncio
async def test_the_wait_goes_on_past_a_node_whose_end_is_not_a_date(caplog):
    """Issue 43: the trigger's judgment of a save read the annotation and crashed the wait."""
    from tpu_rl.rewards import save_stop

    state = FollowState(step_marks=marks((3, 0), (4, 60)), saved=[4, T0 + 90])
    pods = [{"spec": {"nodeName": "tpu-0"}}]
    api = NodesOnly([node("tpu-0", annotation="in a week")])
    assert await save_stop.judge_save(api, state, 4, pods, None, LOG) is None
    why = "node tpu-0: annotation node.gke.io/machine-termination-datetime: not an RFC 3339 "
    assert why + "date-time: 'in a week'" in caplog.text
