"""The pure follower: bounded line cutting, consuming lines once, and the verdicts."""

import logging
import time
import tracemalloc

from tests.integration.test_reward_trigger import post, step
from tpu_rl.kube import verdicts
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


def test_verdict_on_pods_for_a_capacity_wait():
    job = {"spec": {"suspend": True}, "status": {}}
    assert verdicts.pods_verdict("Job j", None, [], 1, False)[0][0] == "not_found"
    failure, waiting = verdicts.pods_verdict("Job j", job, [], 1, False)
    assert failure is None and "suspended (not admitted by Kueue)" in waiting
    pending = {"metadata": {"name": "p"}, "status": {"phase": "Pending"}}
    assert verdicts.pods_verdict("Job j", {}, [pending], 1, False) == (None, None)
    failure, waiting = verdicts.pods_verdict("JobSet s", {}, [pending], 1, True)
    assert failure is None and waiting.startswith("0/1 pods running")
    failed = {"metadata": {"name": "p"}, "status": {"phase": "Failed"}}
    assert verdicts.pods_verdict("JobSet s", {}, [failed], 1, True)[0][0] == "failed"
    assert verdicts.pods_verdict("Job j", {}, [failed], 1, False) == (None, None)


def test_a_job_that_completed_before_the_wait_looked_is_not_waited_for():
    """A fast Job may end, and its pods go, before the capacity wait's first look: waiting for
    pods that will never come would fail a successful conversion at the pending timeout."""
    done = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    assert verdicts.pods_verdict("Job j", done, [], 8, False) == (None, None)
