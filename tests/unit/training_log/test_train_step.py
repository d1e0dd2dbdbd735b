"""The training step line as its sources print it (tpu_rl.training_log.train_step), and the
watch's marks of it and of Orbax's committed save: the formats and captured lines are
quoted from the sources in tests/fixtures/vendor/tunix/log_lines.json."""

from __future__ import annotations

import ast
import json
import logging
import math
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tpu_rl.rewards.line_reader import Line, Resent, consume
from tpu_rl.training_log.train_step import parse_step_line
from tpu_rl.watch import capacity_end
from tpu_rl.watch.state import FollowState

SOURCES = json.loads(
    (Path(__file__).parents[2] / "fixtures/vendor/tunix/log_lines.json").read_text()
)
LOG = logging.getLogger(__name__)
STAMP = "2026-12-04T12:00:{second:02d}.000000Z"
# absl's prefix (absl/logging/__init__.py, get_absl_log_prefix: '%c%02d%02d %02d:%02d:%02d.%06d
# %5d %s:%d] '), Python logging's when absl's handler is not installed, or none
PREFIXES = ("I1204 12:00:00.123456 140213 peft_trainer.py:735] ", "INFO:absl:", "")
# what `%f` prints: a number, and when training diverged nan, inf or -inf
LOSSES = (0.012345, 0.693147, 12.5, math.nan, math.inf, -math.inf)


def formats(kind: str) -> list[dict[str, Any]]:
    return [f for f in SOURCES["formats"] if f["kind"] == kind]


def captured(kind: str) -> list[str]:
    return [c["text"] for c in SOURCES["captured"] if c["kind"] == kind]


def rendered(fmt: str, step: int, loss: float) -> list[str]:
    """The line as absl prints it (`msg % args`), with perplexity np.exp(loss)
    (peft_trainer.py:719) and, besides, the variants a parser must not depend on: without the
    perplexity, one space before the dash."""
    line = fmt % (step, loss, math.exp(loss))
    return [line, line.split("  - ")[0], line.replace("  - ", " - ")]


def marks_of(lines: list[str]) -> FollowState:
    state = FollowState()
    stamped = [Line(f"{STAMP.format(second=i)} {text}") for i, text in enumerate(lines)]
    assert consume(state, stamped, Resent(), LOG) is None
    return state


def first_string(quoted: str) -> str:
    """The first string constant of quoted Python source (adjacent literals joined)."""
    tree = ast.parse(textwrap.dedent(quoted).strip().rstrip(","))
    return next(
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    )


def test_the_sources_quote_their_format_strings():
    """Each format in the fixture is the one in the source text quoted beside it."""
    for f in SOURCES["formats"]:
        assert first_string(f["quoted"]) == f["format"], f


@pytest.mark.parametrize("loss", LOSSES, ids=str)
@pytest.mark.parametrize("prefix", PREFIXES, ids=("absl", "python_logging", "bare"))
def test_every_published_step_line_is_a_step_mark_with_its_loss(prefix, loss):
    """Tunix's `Train step %d training loss: %f  - training perplexity: %f`, in every tagged
    version and at the commit MaxText 0.2.4 pins: the follower reads it (no `Train step N/M`)."""
    for f in formats("train_step"):
        for n, text in enumerate(rendered(f["format"], 41, loss)):
            state = marks_of([prefix + text])
            assert [step for step, _ in state.step_marks] == [41], (f["ref"], n, text)
            assert state.reached_step == 41
    parsed = parse_step_line(prefix + rendered(formats("train_step")[0]["format"], 41, loss)[0])
    assert parsed is not None and parsed.step == 41
    assert parsed.loss == pytest.approx(loss, abs=1e-6, nan_ok=True)
    without = parse_step_line(rendered(formats("train_step")[0]["format"], 41, loss)[1])
    assert without is not None and without.perplexity is None


def test_a_captured_run_s_step_lines_are_marks_and_its_eval_line_is_not():
    """Lines a real run printed (MaxText's DPO notebook, an older Tunix)."""
    state = marks_of([*captured("eval_step"), *captured("train_step")])
    assert [step for step, _ in state.step_marks] == [1, 3]
    assert [parse_step_line(t).loss for t in captured("train_step")] == [0.693147, 0.707984]


def test_eval_loss_lines_are_no_training_step():
    """`Train step %d eval loss: ...` (peft_trainer.py:1131, peft_trainer_v2.py:1375) comes from
    evaluation, not an update."""
    lines = [f["format"] % (7, 0.5, 1.6)[: f["format"].count("%")] for f in formats("eval_step")]
    assert marks_of(lines).step_marks == [] and marks_of(lines).reached_step is None


def test_orbax_s_committed_save_line_is_the_save_mark():
    """Orbax's `Finished saving checkpoint (finalized tmp dir) to `<dir>/<step>`.`, as its
    source formats it for Tunix's actor and as a real run printed it; the synchronous-save line
    (never logged on the asynchronous path) is none."""
    [fmt] = [f["format"] for f in formats("saved")]
    async_save = fmt % (0, "async_save", "gs://bucket/gemma4-26b/trained/rl/checkpoints/actor/25")
    state = marks_of(["I1204 12:00:00.1 140214 atomicity.py:845] " + async_save])
    assert state.saved is not None and state.saved[0] == 25 and state.reached_step == 25
    assert marks_of(captured("saved")).saved[0] == 1
    assert marks_of(captured("sync_saved")).saved is None
    assert capacity_end.SAVED.search(captured("sync_saved")[0]) is None
