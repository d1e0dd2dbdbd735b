"""The MaxText reward-line parser, the line assembler and `python -m tpu_rl.training_log.lines`."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tpu_rl.training_log.lines import (
    LineAssembler,
    RewardMetrics,
    main,
    parse_line,
    parse_lines,
    split_timestamp,
)

ROOT = REPO
LOGS = ROOT / "tests" / "fixtures" / "logs"
ABSL = "W1129 10:00:00.123456 140213 train_rl.py:824] "
POST = (
    "Post RL Training: corr=12, total=64, accuracy=18.75%, partial_accuracy=20.3125%, "
    "format_accuracy=85.9375%, mean_reward=0.1234"
)


def test_design_example_post_line():
    parsed = parse_line(ABSL + POST)
    assert parsed is not None
    assert parsed.kind == "post"
    assert parsed.step is None and parsed.time is None
    assert parsed.metrics == RewardMetrics(12, 64, 18.75, 20.3125, 85.9375, 0.1234)
    assert isinstance(parsed.metrics.corr, int) and isinstance(parsed.metrics.total, int)


def test_pre_and_intermediate_lines():
    pre = parse_line(ABSL + POST.replace("Post", "Pre"))
    step = parse_line(ABSL + POST.replace("Post RL Training", "Intermediate Eval (step=40)"))
    assert pre is not None and pre.kind == "pre"
    assert step is not None and step.kind == "intermediate" and step.step == 40
    assert step.as_dict()["step"] == 40


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (  # pass@k: corr is a float; negative reward
            "corr=6.75, total=64, accuracy=10.546875%, partial_accuracy=12.5%, "
            "format_accuracy=62.5%, mean_reward=-0.0469",
            RewardMetrics(6.75, 64, 10.546875, 12.5, 62.5, -0.0469),
        ),
        (  # zero totals: the accuracies are a plain int 0
            "corr=0, total=0, accuracy=0%, partial_accuracy=0%, format_accuracy=0%, "
            "mean_reward=0.0000",
            RewardMetrics(0, 0, 0.0, 0.0, 0.0, 0.0),
        ),
        (  # `{accuracy=}` of a numpy scalar
            "corr=np.int64(3), total=64, accuracy=np.float64(4.6875)%, "
            "partial_accuracy=np.float64(6.25)%, format_accuracy=np.float64(50.0)%, "
            "mean_reward=-1.0000",
            RewardMetrics(3, 64, 4.6875, 6.25, 50.0, -1.0),
        ),
        (  # older MaxText without mean_reward
            "corr=12, total=64, accuracy=18.75%, partial_accuracy=20.3125%, "
            "format_accuracy=85.9375%",
            RewardMetrics(12, 64, 18.75, 20.3125, 85.9375, None),
        ),
    ],
)
def test_metric_variants(fields, expected):
    parsed = parse_line(f"{ABSL}Post RL Training: {fields}")
    assert parsed is not None
    assert parsed.metrics == expected


def test_nan_reward_is_json_null():
    parsed = parse_line(
        ABSL + "Post RL Training: corr=0, total=0, accuracy=0%, partial_accuracy=0%, "
        "format_accuracy=0%, mean_reward=nan"
    )
    assert parsed is not None
    assert parsed.metrics.as_dict()["mean_reward"] is None
    json.dumps(parsed.metrics.as_dict(), allow_nan=False)


@pytest.mark.parametrize(
    "line",
    [
        ABSL + POST,
        f"WARNING:absl:{POST}",
        POST,
        f"2025-11-29T10:00:00.123456789Z {ABSL}{POST}",
        f"2025-11-29T10:00:00Z {ABSL}{POST}\r\n",
        f"{ABSL}{POST}\r",
    ],
)
def test_prefixes_and_line_endings(line):
    parsed = parse_line(line)
    assert parsed is not None and parsed.kind == "post"
    assert parsed.metrics.mean_reward == 0.1234


def test_kubernetes_timestamp_becomes_time():
    parsed = parse_line(f"2025-11-29T10:00:00.123456789Z {ABSL}{POST}")
    assert parsed is not None
    assert parsed.time == "2025-11-29T10:00:00.123456789Z"
    assert parsed.as_dict()["time"] == "2025-11-29T10:00:00.123456789Z"
    assert split_timestamp("2025-11-29T10:00:00+09:00 x") == ("2025-11-29T10:00:00+09:00", "x")
    assert split_timestamp("I1129 10:00:00.1 x") == (None, "I1129 10:00:00.1 x")


@pytest.mark.parametrize(
    "line",
    [
        "W1129 11:33:05.000001 140213 rl_hooks.py:93] [intermediate-eval] step=30 failed: "
        "RuntimeError('DEADLINE_EXCEEDED')",
        ABSL + "RL Training Completed Successfully!",
        ABSL + "Post RL Training: corr=12, total=64, accuracy=18.75%, partial_acc",  # cut off
        "E1129 10:00:00.600000 140288 proxy_client.cc:97] RPC to proxy failed: UNAVAILABLE",
        "echo PrePost RL Training: corr=1, total=2, accuracy=50%, partial_accuracy=50%, "
        "format_accuracy=50%",
        "",
    ],
)
def test_not_reward_lines(line):
    assert parse_line(line) is None


def test_parse_lines_keeps_last_pre_and_post():
    lines = [
        ABSL + POST.replace("Post", "Pre").replace("corr=12", "corr=1"),
        "noise",
        ABSL + POST.replace("Post", "Pre").replace("corr=12", "corr=2"),
        ABSL + POST,
    ]
    log = parse_lines(lines)
    assert log.pre is not None and log.pre.metrics.corr == 2
    assert log.post is not None and log.post.metrics.corr == 12
    assert log.intermediate == []


def test_line_assembler_joins_split_lines():
    assembler = LineAssembler()
    assert assembler.feed(ABSL + "Post RL Training: corr=12, tot") == []
    assert assembler.pending.endswith("tot")
    assert assembler.feed("al=64\r") == []
    assert assembler.feed("\nnext line\nhalf") == [
        ABSL + "Post RL Training: corr=12, total=64",
        "next line",
    ]
    assert assembler.flush() == "half"
    assert assembler.flush() is None


def test_fixture_plain_log():
    log = parse_lines((LOGS / "train_rl_plain.log").read_text().splitlines())
    assert log.pre is not None and log.pre.metrics.mean_reward == -0.2031
    assert log.post is not None and log.post.metrics.accuracy == 18.75
    assert [line.step for line in log.intermediate] == [10, 20, 40]


def _run_cli(log_file: Path) -> dict:
    """Run it exactly as `make rewards LOG=...` does."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "plugins")}
    proc = subprocess.run(
        [sys.executable, "-m", "tpu_rl.training_log.lines", str(log_file)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=True,
    )
    return json.loads(proc.stdout)


def test_cli_plain_and_timestamped_logs_agree():
    plain = _run_cli(LOGS / "train_rl_plain.log")
    stamped = _run_cli(LOGS / "train_rl_k8s_timestamps.log")
    assert plain["post"] == {
        "corr": 12,
        "total": 64,
        "accuracy": 18.75,
        "partial_accuracy": 20.3125,
        "format_accuracy": 85.9375,
        "mean_reward": 0.1234,
    }
    assert "time" not in plain["pre"]
    assert stamped["post"].pop("time").startswith("2025-11-29T12:36:31.250118")
    assert stamped["pre"].pop("time").startswith("2025-11-29T10:00:00.123456")
    for entry in stamped["intermediate"]:
        assert entry.pop("time")
    assert stamped == plain
    assert [e["step"] for e in plain["intermediate"]] == [10, 20, 40]


def test_cli_crlf_pass_at_k_log():
    out = _run_cli(LOGS / "train_rl_crlf_passk.log")
    assert out["pre"]["corr"] == 3.5 and out["pre"]["mean_reward"] == -0.4375
    assert out["post"]["corr"] == 6.75 and out["post"]["partial_accuracy"] == 12.5
    assert out["intermediate"][0]["step"] == 5


def test_cli_log_without_eval(capsys):
    assert main([str(LOGS / "train_rl_no_eval.log")]) == 0
    assert json.loads(capsys.readouterr().out) == {"pre": None, "post": None, "intermediate": []}


@pytest.mark.parametrize("prefix", ["", ABSL, "2026-11-29T10:00:00.5Z " + ABSL])
def test_a_post_line_cut_at_container_exit_does_not_count(prefix):
    """`mean_reward=0.12` of `0.1234`: without its newline the line's last number may be short."""
    assembler = LineAssembler()
    assert assembler.feed("progress\n" + prefix + POST[:-2]) == ["progress"]
    assert assembler.flush() is None
    assert assembler.pending == ""


def test_a_post_line_with_its_newline_counts_and_other_partial_tails_are_kept():
    assembler = LineAssembler()
    (line,) = assembler.feed(ABSL + POST + "\nTraceback (most recent")
    assert parse_line(line).metrics.mean_reward == 0.1234
    assert assembler.flush() == "Traceback (most recent"


def test_cli_ignores_a_cut_post_line_at_the_end_of_a_saved_log(tmp_path):
    log_file = tmp_path / "cut.log"
    log_file.write_text(ABSL + POST.replace("0.1234", "0.9") + "\n" + ABSL + POST[:-2])
    assert _run_cli(log_file)["post"]["mean_reward"] == 0.9
