"""The triggerer scaling figures (tools/bench/trigger_scaling.py): how they are judged, and the
cost the bench found: the reward trigger polled once per log chunk after a reward line."""

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from airflow.providers.google.common.hooks.base_google import GoogleBaseAsyncHook

from sandbox.kube_emulator import KubeEmulator, running_emulator
from sandbox.pod_scripts import PodInfo
from tools.bench.trigger_scaling import (
    COUNTS,
    STEP_S,
    TRAIN_S,
    entries,
    expected_lines,
    log_delivery,
    per_run,
    too_loaded,
    training_logs,
)
from tpu_rl.rewards.trigger import RewardTrigger
from tpu_rl.training_log.train_step import parse_step_line

NS, JOB, POD, C = "default", "job-rl-x-train", "job-rl-x-train-0", "maxtext"
PRE = "W1129 10:00:00.1 1 train_rl.py:785] Pre RL Training: corr=8, total=64, accuracy=12.5%, "
PRE += "partial_accuracy=20.3125%, format_accuracy=85.9375%, mean_reward=0.0821\n"

STEP = (
    "I1129 10:00:01.{n:02d} 1 peft_trainer.py:735] Train step {n} training loss: 0.693147  - "
    "training perplexity: 2.000000\n"
)


def process(waits: int, grown_mib: float, cpu_s: float) -> dict[str, Any]:
    """A child's result: RSS grown by `grown_mib` in all, `cpu_s` CPU seconds in the window."""
    base = 200_000
    return {
        "waits": waits,
        "baseline_rss_kib": base,
        "peak_rss_in_window_kib": base + int(grown_mib * 1024),
        "window_cpu_s": cpu_s,
        "start_cpu_s": 0.0,
    }


def judged(
    ours: dict[int, tuple[float, float]],
    provider_cpu_per_run: float,
    delivery: dict[int, float] | None = None,
) -> dict[str, Any]:
    """entries() for our (MiB, CPU s) per run at each count, the provider's CPU per run, and
    the share of the simulated log ours read at each count (all of it unless given)."""
    rows, raw = {}, {}
    for n in COUNTS:
        mib, cpu = ours[n]
        raw[n] = {
            "reward": process(n, mib * n, cpu * n),
            "provider": process(n, 0.2 * n, provider_cpu_per_run * n),
        }
        rows[n] = {kind: per_run(r) for kind, r in raw[n].items()}
        rows[n]["cpu_ratio"] = rows[n]["reward"]["cpu_s"] / provider_cpu_per_run
        rows[n]["log_delivery"] = (delivery or {}).get(n, 1.0)
    return entries(rows, raw)


def test_per_run_is_growth_over_the_baseline_divided_by_runs():
    assert per_run(process(10, 15.0, 0.3)) == {"memory_mib": 1.5, "cpu_s": 0.03, "start_cpu_s": 0}


def test_goals_hold_within_memory_cpu_and_linearity():
    met = judged({1: (3.0, 0.05), 10: (1.9, 0.02), 50: (1.8, 0.02)}, 0.0125)
    assert met["triggerer_memory_per_wait_mib"]["goal_met"]
    assert met["triggerer_cpu_per_wait_s"]["goal_met"]


@pytest.mark.parametrize(
    "ours, missed",
    [
        ({1: (1.0, 0.02), 10: (2.1, 0.02), 50: (1.8, 0.02)}, "memory"),  # over 2 MiB at 10
        ({1: (1.0, 0.02), 10: (1.0, 0.02), 50: (1.5, 0.02)}, "memory"),  # not linear
        ({1: (1.0, 0.02), 10: (1.0, 0.03), 50: (1.0, 0.02)}, "cpu"),  # 2.4x at 10
        ({1: (1.0, 0.02), 10: (1.0, 0.015), 50: (1.0, 0.024)}, "cpu"),  # not linear
    ],
)
def test_a_miss_at_10_or_50_runs_or_superlinear_growth_misses_the_goal(ours, missed):
    result = judged(ours, 0.0125)
    name = {"memory": "triggerer_memory_per_wait_mib", "cpu": "triggerer_cpu_per_wait_s"}
    assert not result[name[missed]]["goal_met"]
    other = "cpu" if missed == "memory" else "memory"
    assert result[name[other]]["goal_met"]


def test_the_window_simulates_two_lines_a_step_and_a_reward_line_each_eval():
    """20 s at a step a second: 40 step and metrics lines, 1/3 of a reward line (one a minute)."""
    assert expected_lines(1) == pytest.approx(40 + 20 / 60)
    assert expected_lines(50) == pytest.approx(50 * (40 + 20 / 60))
    assert log_delivery({"waits": 3, "log_lines_read": 121}) == 1.0  # 3 x (40 + 1/3)
    assert log_delivery({"waits": 3, "log_lines_read": 85}) == 0.702


def test_a_short_log_at_a_judged_count_refuses_the_cpu_verdict():
    assert too_loaded({1: 0.3, 10: 0.95, 50: 0.9}) is None  # 1 run is not judged
    reason = "log delivered at 62% of the simulated rate: the machine is too loaded to judge"
    assert too_loaded({1: 1.0, 10: 0.95, 50: 0.62}) == reason
    met = judged({1: (1.0, 0.01), 10: (1.0, 0.01), 50: (1.0, 0.01)}, 0.0125, {10: 0.62})
    cpu = met["triggerer_cpu_per_wait_s"]
    assert not cpu["goal_met"]
    assert cpu["reason"] == reason
    assert cpu["details"]["per_run"]["10"]["log_delivery"] == 0.62
    assert met["triggerer_memory_per_wait_mib"]["goal_met"]


@pytest.fixture
def emu(monkeypatch: pytest.MonkeyPatch) -> Iterator[KubeEmulator]:
    with running_emulator(token="tok") as emulator:

        class Token:
            async def get(self) -> str:
                return emulator.token

        async def get_token(self: GoogleBaseAsyncHook, *, session: Any = None) -> Token:
            return Token()

        monkeypatch.setattr(GoogleBaseAsyncHook, "get_token", get_token)
        yield emulator


def start_training(emu: KubeEmulator) -> None:
    """The training Job and its running pod."""
    template = {"spec": {"restartPolicy": "Never", "containers": [{"name": C, "image": "m"}]}}
    meta = {"name": JOB, "namespace": NS}
    emu.create(
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {"template": template}}
    )
    meta = {"name": POD, "namespace": NS, "labels": {"job-name": JOB}}
    emu.create({"apiVersion": "v1", "kind": "Pod", "metadata": meta, **template})
    emu.set_pod_phase(NS, POD, "Running")


def job_polls(emu: KubeEmulator) -> int:
    return sum(1 for r in emu.requests if r.method == "GET" and r.path.endswith(f"/jobs/{JOB}"))


@pytest.mark.asyncio
async def test_the_trigger_polls_once_per_reward_line_not_per_log_line(emu):
    """After the Pre line, 30 step lines arrive in 3 s: the trigger polls for the reward line
    (to save its position), not for each chunk (it did: two polls and Job patches a second)."""
    start_training(emu)
    emu.append_log(NS, POD, C, PRE)
    trigger = RewardTrigger(
        cluster_url=emu.url,
        ssl_ca_cert=emu.ca_b64,
        namespace=NS,
        job_name=JOB,
        deadline=time.time() + 60,
        poll_interval=30.0,
        pending_timeout=60.0,
    )
    waiting = asyncio.create_task(anext(aiter(trigger.run())))
    try:
        await asyncio.sleep(1.0)  # the first poll, and the one for the Pre line
        polls = job_polls(emu)
        for n in range(30):
            emu.append_log(NS, POD, C, STEP.format(n=n))
            await asyncio.sleep(0.1)
        assert trigger.follower.state.reached_step == 29  # every line was read
        assert job_polls(emu) - polls <= 1
    finally:
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)


def test_the_bench_pods_log_the_step_lines_the_reward_wait_reads():
    """Each bench pod logs Tunix's step line for every step (the bench's script broke when the
    sandbox's step line gained its loss, and measured nothing)."""
    script = training_logs()(PodInfo("default", "pod-0", JOB, None, 0, {}))
    texts = [s.text() if callable(s.text) else s.text for s in script.steps if s.action == "log"]
    steps = [line.step for text in texts if (line := parse_step_line(text))]
    assert steps == list(range(1, int(TRAIN_S / STEP_S) + 1))
