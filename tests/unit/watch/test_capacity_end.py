"""When the capacity ends and whether training stops at the save just made
(tpu_rl.watch.capacity_end), and the follower's marks of steps and saves."""

from __future__ import annotations

import logging

import pytest

from tests.support.capacity_nodes import T0, marks, node
from tpu_rl.rewards.line_reader import Line, Resent, consume
from tpu_rl.watch import capacity_end
from tpu_rl.watch.state import FollowState

LOG = logging.getLogger(__name__)


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


def test_the_pace_is_the_longest_step_gap_without_its_save_and_the_save_s_own_time():
    """Tunix logs step N's line an update late, so save N starts right after step
    N-1's line and lies between the lines of steps N-1 and N."""
    # steps every 60-70 s, step 4's save commits 30 s after step 3's line (period 4)
    m = marks((2, 60), (3, 130), (4, 220), (5, 280))
    pace = capacity_end.measured_pace(m, [4, T0 + 160], period=4)
    assert pace == capacity_end.Pace(step_s=70, save_s=30)
    # a save every step: each gap less the save's time
    every = capacity_end.measured_pace(marks((3, 130), (4, 220)), [4, T0 + 160], 1)
    assert every == capacity_end.Pace(step_s=60, save_s=30)
    assert capacity_end.measured_pace(marks((5, 280)), [4, T0 + 160], 4) is None


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


def step_line(step: int, loss: str = "0.693147", perplexity: str = "2.000000") -> str:
    """Tunix's step line (tunix/sft/peft_trainer.py:735-740 at c4ec573) with absl's prefix."""
    text = f"Train step {step} training loss: {loss}  - training perplexity: {perplexity}"
    return f"I1201 10:00:00.123456 140213 peft_trainer.py:735] {text}"


def committed(step: int) -> str:
    """Orbax's line once a step's save is committed (atomicity.py:845-851 at 20be488a)."""
    return (
        "I1201 10:00:00.123456 140214 atomicity.py:845] [process=0][thread=async_save] Finished "
        f"saving checkpoint (finalized tmp dir) to `gs://b/trained/rl/checkpoints/actor/{step}`."
    )


def test_the_follower_marks_step_lines_and_orbax_s_committed_save_line():
    """The lines in Tunix's order (step N's an update late, after save N began)."""
    state = FollowState()
    lines = [
        stamped(T0 + 60, step_line(1)),
        stamped(T0 + 70, committed(2)),
        stamped(T0 + 120, step_line(2, "0.012345", "1.012421")),
        stamped(T0 + 125, "W1201 hooks.py:98] Intermediate Eval (step=2): corr=1"),
    ]
    assert consume(state, lines, Resent(), LOG) is None
    assert state.step_marks == [[1, T0 + 60], [2, T0 + 120]]
    assert state.saved == [2, T0 + 70]
    assert state.reached_step == 2
    many = [stamped(T0 + 200 + i, step_line(3 + i, "nan", "nan")) for i in range(10)]
    consume(state, many, Resent(), LOG)
    assert len(state.step_marks) == capacity_end.MARKS_KEPT
    assert state.step_marks[-1] == [12, T0 + 209]


def test_a_committed_save_is_its_step_reached_before_its_line():
    """The stop at a save comes before the saved step's own line (an update late): the save
    says the step was done."""
    state = FollowState()
    consume(state, [stamped(T0 + 60, step_line(7)), stamped(T0 + 61, committed(8))], Resent(), LOG)
    assert (state.reached_step, state.saved) == (8, [8, T0 + 61])


def test_orbax_s_synchronous_save_line_is_no_save_mark():
    """`Finished synchronous save.` is never logged on MaxText RL's asynchronous save path;
    where it is, the committed line came first (dpo_qwen3_demo.ipynb:2732-2736)."""
    state = FollowState()
    sync = "[process=0][thread=MainThread][step=2] Finished synchronous save."
    consume(state, [stamped(T0, f"I1201 checkpoint_manager.py:1589] {sync}")], Resent(), LOG)
    assert state.saved is None


def test_an_rfc_3339_annotation_in_lower_case_is_read():
    """RFC 3339 section 5.6 allows "t" and "z": the annotation is read, not a crash."""
    lower = node("a", annotation="2027-01-22t08:00:00.5z")
    assert capacity_end.node_end(lower) == capacity_end.epoch("2027-01-22T08:00:00Z") + 0.5
    offset = node("b", annotation="2027-01-22T09:00:00+01:00")
    assert capacity_end.node_end(offset) == capacity_end.epoch("2027-01-22T08:00:00Z")


@pytest.mark.parametrize("value", ["abc", "2027-01-22", "2027-13-22T08:00:00Z", "1800000000"])
def test_a_node_whose_end_is_not_a_date_is_skipped_and_named(value):
    """GKE copies the VM's terminationTimestamp as is: a value that is no RFC 3339
    date-time is skipped (the node counts as not known to end), named in one line."""
    nodes = [node("bad", annotation=value), node("good", annotation="2027-01-22T08:00:00Z")]
    ends = capacity_end.slice_end(nodes, {"bad", "good"})
    assert ends.at == capacity_end.epoch("2027-01-22T08:00:00Z") and ends.nodes == ["good"]
    [why] = ends.unreadable
    assert why.startswith("node bad: annotation node.gke.io/machine-termination-datetime: ")
    assert repr(value) in why and "\n" not in why


def test_steps_logged_out_of_order_give_no_pace():
    """Step 3's line stamped before step 2's gives no negative step time, which would put the
    next save before a capacity end in the past."""
    backwards = marks((2, 120), (3, 60))
    assert capacity_end.measured_pace(backwards, [2, T0 + 130], period=4) is None
    mixed = marks((1, 0), (2, 120), (3, 60), (4, 190))
    pace = capacity_end.measured_pace(mixed, [2, T0 + 130], period=8)
    assert pace is not None and pace.step_s == 130  # 3 -> 4; 2 -> 3 went backwards
