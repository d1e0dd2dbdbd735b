"""The pure follower (tpu_rl.rewards.line_reader): bounded line cutting, consuming lines once,
the reach of the steps the log showed."""

import logging
import time
import tracemalloc

from tests.support.kube_wait import post, step
from tests.support.wait_task import QuietLog
from tpu_rl.rewards.line_reader import Line, LineCutter, Resent, consume
from tpu_rl.watch.core import LINE_CAP
from tpu_rl.watch.state import FollowState

STAMP = "2026-12-01T05:00:00.123456789Z "


def test_lines_split_across_chunks_come_out_whole():
    cutter = LineCutter()
    data = (STAMP + "first\r\n" + STAMP + "sécond\n" + STAMP + "partial").encode()
    lines = [line for i in range(len(data)) for line in cutter.feed(data[i : i + 1])]
    assert [line.text for line in lines] == [STAMP + "first", STAMP + "sécond"]
    assert cutter.flush() == Line(STAMP + "partial")
    assert cutter.flush() is None


def test_a_post_line_cut_at_container_exit_does_not_count():
    cutter = LineCutter()
    whole = post(reward=0.1875)
    assert cutter.feed(whole[:-3].encode()) == []  # the exit cut `0.1875` to `0.18`
    assert cutter.flush() is None
    assert cutter.feed(whole.encode())[0].text == whole.rstrip("\n")


def test_a_64_mib_line_without_newline_stays_in_bounded_memory_and_linear_time():
    chunk = b"x" * (1 << 20)
    cutter = LineCutter()
    tracemalloc.start()
    started = time.perf_counter()
    for _ in range(64):
        assert cutter.feed(chunk) == []
    line = cutter.feed(b"\n" + STAMP.encode() + b"next\n")
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert line[0].cut and len(line[0].text) == LINE_CAP
    assert line[1] == Line(STAMP + "next")
    assert peak < 4 * LINE_CAP, peak  # the 1 MiB chunks are the caller's
    assert elapsed < 2.0, elapsed


def test_a_16_mib_backlog_of_short_lines_is_consumed_in_linear_time():
    state, log = FollowState(), logging.getLogger("test.follower")
    lines = b"".join(
        f"2026-12-01T05:00:{i % 60:02d}.{i:09d}Z I1201 step {i} loss=0.1 {'y' * 100}\n".encode()
        for i in range(2000)
    )
    cutter, started, total = LineCutter(), time.perf_counter(), 0
    while total < 16 << 20:
        consume(state, cutter.feed(lines), Resent(), log)
        total += len(lines)
    assert time.perf_counter() - started < 15


def test_a_cut_line_is_logged_once_and_never_read_as_a_reward(caplog):
    caplog.set_level(logging.INFO)
    state, log = FollowState(), logging.getLogger("test.follower")
    long_post = (STAMP + post().rstrip("\n") + " " + "z" * LINE_CAP + "\n").encode()
    lines = LineCutter().feed(long_post + (STAMP[:-2] + "1Z " + step(10)).encode())
    assert lines[0].cut and "Post RL Training" in lines[0].text
    assert consume(state, lines, Resent(), log) is None
    assert consume(state, lines, Resent(state.seen_at_last_time), log) is None  # read again
    cut = [r for r in caplog.records if "cut, not read for rewards" in r.getMessage()]
    assert len(cut) == 1 and cut[0].levelno == logging.WARNING
    assert state.reward_lines == 1  # the step line after it


def test_the_highest_step_the_log_showed_is_kept():
    state = FollowState()
    lines = [
        "2026-12-01T10:00:01Z I1201 peft_trainer.py:735] Train step 59 training loss: "
        "0.012345  - training perplexity: 1.012421",
        "2026-12-01T10:00:02Z W1201 hooks.py:98] Intermediate Eval (step=60): corr=1",
    ]
    consume(state, [Line(text) for text in lines], Resent(), QuietLog())
    assert state.reached_step == 60  # the evaluation: a step line's fallback
    later = "2026-12-01T10:00:03Z I1201 peft_trainer.py:735] Train step 61 training loss: nan  "
    consume(state, [Line(later + "- training perplexity: nan")], Resent(), QuietLog())
    assert state.reached_step == 61
