"""The sandbox's GRPO client logs the step and save lines as the pinned sources print them, in
their order, and the product's follower reads them."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from sandbox.workloads import STEP_FORMAT, grpo_client_script
from tpu_rl.rewards.line_reader import Line, Resent, consume
from tpu_rl.watch.state import FollowState

SOURCES = json.loads(
    (Path(__file__).parents[1] / "fixtures/vendor/tunix/log_lines.json").read_text()
)
BASE = "gs://b/gemma4-26b/trained/"
ABSL = r"^[IW]\d{4} \d\d:\d\d:\d\d\.\d{6} \d+ "
STEP = re.compile(
    ABSL + r"peft_trainer\.py:735\] Train step (\d+) training loss: -?\d+\.\d{6}  - "
    r"training perplexity: \d+\.\d{6}$"
)
SAVED = re.compile(
    ABSL + r"atomicity\.py:845\] \[process=0\]\[thread=async_save\] Finished saving checkpoint "
    rf"\(finalized tmp dir\) to `{BASE}rl/checkpoints/actor/(\d+)`\.$"
)
EVAL = re.compile(ABSL + r"hooks\.py:98\] Intermediate Eval \(step=(\d+)\): ")


def events(lines: list[str]) -> list[str]:
    """Step lines, commits, evaluations and the end, as `step N` / `saved N` / `eval N`."""
    out = []
    for line in lines:
        for name, pattern in (("step", STEP), ("saved", SAVED), ("eval", EVAL)):
            if match := pattern.match(line):
                out.append(f"{name} {match.group(1)}")
        if "RL Training Completed Successfully!" in line:
            out.append("completed")
    return out


def logged(**kwargs) -> list[str]:
    """The client's log lines and, as `WRITE <uri>`, its object writes, in order (no sleep)."""
    out: list[str] = []
    script = grpo_client_script(
        base_output_directory=BASE,
        write_object=lambda uri, _data: out.append(f"WRITE {uri}"),
        **kwargs,
    )
    for step in script.steps:
        if step.action == "log":
            out += (step.text() if callable(step.text) else step.text).splitlines()
        elif step.action == "call" and step.fn is not None:
            step.fn(None)  # type: ignore[arg-type]  # a plain callable writer reads no PodInfo
    return out


def test_the_step_format_is_tunix_s_at_the_pinned_commit():
    [pinned] = [
        f for f in SOURCES["formats"] if f["kind"] == "train_step" and f["commit"][:7] == "c4ec573"
    ]
    assert pinned["format"] == STEP_FORMAT


def test_each_step_s_line_comes_an_update_late_the_last_at_close():
    """Tunix (peft_trainer.py:770-787, 1016-1027, 1078-1079): update N logs step N-1's line and
    its evaluation, then saves N; close logs the last line, then the forced last save."""
    lines = logged(num_batches=5, checkpoint_period=2, eval_every=2, step_seconds=1)
    assert events(lines) == [
        "step 1",
        "saved 2",
        "step 2",
        "eval 2",
        "step 3",
        "saved 4",
        "step 4",
        "eval 4",
        "step 5",
        "saved 5",
        "completed",
    ]
    # the commit line follows the save's last object, the step's commit file
    commit = lines.index(next(line for line in lines if SAVED.match(line)))
    assert lines[commit - 1] == f"WRITE {BASE}rl/checkpoints/actor/2/commit_success.txt"


def test_a_resumed_client_logs_its_first_step_after_its_second_update():
    lines = logged(num_batches=5, checkpoint_period=2, eval_every=10, resume_from=2)
    assert events(lines) == ["step 3", "saved 4", "step 4", "step 5", "saved 5", "completed"]


def test_a_save_cut_short_logs_no_commit():
    lines = logged(num_batches=4, checkpoint_period=2, eval_every=10, cut_saves={2: 3})
    assert events(lines) == ["step 1", "step 2", "step 3", "saved 4", "step 4", "completed"]


def test_the_follower_reads_the_client_s_steps_and_saves():
    lines = [line for line in logged(num_batches=5, checkpoint_period=2) if "WRITE" not in line]
    state = FollowState()
    stamped = [Line(f"2026-12-04T12:00:{i:02d}Z {text}") for i, text in enumerate(lines)]
    consume(state, stamped, Resent(), logging.getLogger(__name__))
    assert [step for step, _ in state.step_marks] == [1, 2, 3, 4, 5]
    assert state.saved is not None and state.saved[0] == 5 and state.reached_step == 5
