"""A triggerer running N waits of one kind at once: python -m tools.bench.scaling_child ARGS_JSON.

As Airflow's triggerer runs triggers (airflow/jobs/triggerer_job_runner.py,
`TriggerRunner.run_trigger`: `greenback.ensure_portal()`, then `async for event in
trigger.run()`), every wait is a task of one event loop. The waits start spread over one poll
interval (deferrals arrive at different times); once all have started and settled, the
process's CPU seconds (`time.process_time()`: user + system, this process only) and its
resident memory (VmRSS, sampled) are read over a fixed window, with the training-log lines the
reward triggers consumed in it (`LineCount`). Prints one line: MARK + JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

from tools.bench.redefer import until_end

MARK = "BENCH-SCALING "
SETTLE_S = 2.0  # after the last wait started: its first poll and its watches are in
SAMPLE_S = 0.5


class LineCount:
    """The log lines the reward triggers hand to `consume` (tpu_rl/rewards/line_reader.py), the
    one step every line a follower reads goes through (pod_log.PodLogReader._read_log calls it
    by its module-level name at each chunk, so patching `pod_log.consume` sees them all)."""

    def __init__(self) -> None:
        self.lines = 0

    def counting(self, consume: Callable[..., Any]) -> Callable[..., Any]:
        def counted(state: Any, lines: Sequence[Any], *rest: Any) -> Any:
            self.lines += len(lines)
            return consume(state, lines, *rest)

        return counted


def rss_kib() -> int:
    status = Path("/proc/self/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS")))


def reward_wait(args: dict[str, Any], job: dict[str, str]) -> Any:
    """The product's reward trigger, with the kwargs RewardSensor defers with."""
    from tpu_rl.rewards.trigger import RewardTrigger

    return RewardTrigger(
        cluster_url=args["url"],
        ssl_ca_cert=args["ca_b64"],
        namespace=args["namespace"],
        job_name=job["job"],
        deadline=time.time() + 3600,
        container_name=args["container"],
        backend_jobset_name=job.get("backend"),
        pending_timeout=3600,
        poll_interval=args["poll_s"],
    )


def provider_wait(args: dict[str, Any], job: dict[str, str]) -> Any:
    """The provider's Job trigger, with the kwargs GKEStartJobOperator defers with
    (airflow/providers/google/cloud/operators/kubernetes_engine.py, GKEStartJobOperator.execute:
    get_logs and do_xcom_push at the operator's defaults)."""
    from airflow.providers.google.cloud.triggers.kubernetes_engine import GKEJobTrigger

    return GKEJobTrigger(
        cluster_url=args["url"],
        ssl_ca_cert=args["ca_b64"],
        job_name=job["job"],
        job_namespace=args["namespace"],
        pod_names=[job["pod"]],
        pod_namespace=args["namespace"],
        base_container_name=args["container"],
        poll_interval=args["poll_s"],
        get_logs=True,
        do_xcom_push=False,
    )


KINDS: dict[str, Callable[[dict[str, Any], dict[str, str]], Any]] = {
    "reward": reward_wait,
    "provider": provider_wait,
}


async def run_trigger(trigger: Any, delay: float, ended: list[dict[str, Any]]) -> None:
    """One trigger as the triggerer runs it, started after `delay`."""
    import greenback

    await asyncio.sleep(delay)
    await greenback.ensure_portal()
    ended.append(await until_end(trigger))  # past progress reports, as the sensor defers again


async def measure(args: dict[str, Any], base_rss: int, read: LineCount) -> dict[str, Any]:
    make, jobs, poll_s = KINDS[args["kind"]], args["jobs"], args["poll_s"]
    ended: list[dict[str, Any]] = []
    started_cpu = time.process_time()
    tasks = [
        asyncio.create_task(run_trigger(make(args, job), poll_s * i / len(jobs), ended))
        for i, job in enumerate(jobs)
    ]
    await asyncio.sleep(poll_s + SETTLE_S)
    cpu, rss_start, peak, lines = time.process_time(), rss_kib(), 0, read.lines
    end = time.monotonic() + args["window_s"]
    while (left := end - time.monotonic()) > 0:
        await asyncio.sleep(min(SAMPLE_S, left))
        peak = max(peak, rss_kib())
    window_cpu, lines = time.process_time() - cpu, read.lines - lines
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {
        "waits": len(jobs),
        "baseline_rss_kib": base_rss,
        "rss_after_start_kib": rss_start,
        "peak_rss_in_window_kib": peak,
        "start_cpu_s": round(cpu - started_cpu, 4),
        "window_cpu_s": round(window_cpu, 4),
        "log_lines_read": lines,
        "ended_early": ended[:3],
        "ended_early_count": len(ended),
    }


def main(args: dict[str, Any]) -> dict[str, Any]:
    import greenback  # noqa: F401  (the triggerer has it loaded)
    from airflow.providers.google.common.hooks.base_google import GoogleBaseHook

    from sandbox.cloud import SandboxCredentials
    from tpu_rl.rewards import pod_log

    KINDS[args["kind"]](args, args["jobs"][0])  # imports the trigger's modules
    credentials = SandboxCredentials(SimpleNamespace(token=args["token"]))  # type: ignore[arg-type]
    base_rss, read = rss_kib(), LineCount()
    with (
        mock.patch.object(
            GoogleBaseHook, "get_credentials_and_project_id", lambda hook: (credentials, "p")
        ),
        mock.patch.object(pod_log, "consume", read.counting(pod_log.consume)),
    ):
        return asyncio.run(measure(args, base_rss, read))


if __name__ == "__main__":
    print(MARK + json.dumps(main(json.loads(sys.argv[1]))), flush=True)
