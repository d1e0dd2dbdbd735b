"""A triggerer reduced to the reward trigger: python -m tools.bench.trigger_child ARGS_JSON.

Follows each given training Job in turn until its wait ends (a new trigger after each progress
report, as the sensor defers again: tools.bench.redefer), and prints
one line: MARK + JSON with, per Job, the CPU seconds the wait took and the process's peak RSS
so far (VmHWM, KiB). The first Job is an ordinary run: the process's baseline.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

from tools.bench.redefer import until_end

MARK = "BENCH-TRIGGER "


def peak_rss_kib() -> int:
    status = Path("/proc/self/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")))


async def wait_end(args: dict, job_name: str) -> dict:
    from tpu_rl.rewards.trigger import RewardTrigger

    trigger = RewardTrigger(
        cluster_url=args["url"],
        ssl_ca_cert=args["ca_b64"],
        namespace=args["namespace"],
        job_name=job_name,
        deadline=time.time() + 600,
        poll_interval=args["poll_s"],
        pending_timeout=600,
    )
    return await until_end(trigger)


def main(args: dict) -> dict:
    from airflow.providers.google.common.hooks.base_google import GoogleBaseHook

    from sandbox.cloud import SandboxCredentials

    credentials = SandboxCredentials(SimpleNamespace(token=args["token"]))  # type: ignore[arg-type]
    results = {}
    with mock.patch.object(
        GoogleBaseHook, "get_credentials_and_project_id", lambda hook: (credentials, "p")
    ):
        for case, job_name in args["jobs"].items():
            cpu = time.process_time()
            event = asyncio.run(wait_end(args, job_name))
            results[case] = {
                "cpu_s": round(time.process_time() - cpu, 3),
                "peak_rss_kib": peak_rss_kib(),
                "status": event.get("status"),
            }
    return results


if __name__ == "__main__":
    print(MARK + json.dumps(main(json.loads(sys.argv[1]))), flush=True)
