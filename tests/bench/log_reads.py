"""log_read_amplification: log bytes the follower fetched / log bytes the training produced.

Two identical training runs side by side in one sandbox: one followed by the product's
RewardTrigger, the other by a naive loop that re-reads the whole log every poll until the
`Post RL Training:` line. Both poll at the same interval: the product's default 30 s against
the script's 60 s steps, compressed by the same time scale as the script. Bytes are the
`response_bytes` of the emulator's `/log` requests; produced bytes are the log up to and
including the Post line as served with `timestamps=true` (the form both readers ask for).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import Any
from urllib.parse import quote

import aiohttp

from tests.bench.metric import metric
from tests.bench.occupancy import first_event
from tests.bench.workload import new_run, scenario, train_job_name
from tests.sandbox.controller import Controller
from tests.sandbox.harness import Sandbox
from tests.sandbox.kube_emulator import KubeEmulator
from tpu_rl.layout import RunLayout
from tpu_rl.reward_trigger import RewardTrigger

GOAL = 1.5
MIN_POLLS = 50
TIME_SCALE = 0.003  # 3110 simulated seconds of training: about 9 s
POLL_S = 30 * TIME_SCALE
POST = b"Post RL Training:"


def pod_path(emu: KubeEmulator, layout: RunLayout) -> tuple[str, str]:
    """The (pod name, namespace path) of the run's only training pod."""
    ns = layout.settings.namespace
    (pod,) = emu.list("pods", ns, f"job-name={train_job_name(layout)}")
    return pod["metadata"]["name"], f"/api/v1/namespaces/{quote(ns, safe='')}"


def fetched(emu: KubeEmulator, layout: RunLayout) -> tuple[int, int]:
    """(bytes, requests) of the GETs of the run's pod log."""
    name, ns_path = pod_path(emu, layout)
    path = f"{ns_path}/pods/{name}/log"
    sizes = [r.response_bytes for r in emu.requests if r.path == path and r.method == "GET"]
    return sum(sizes), len(sizes)


def produced(emu: KubeEmulator, layout: RunLayout) -> int:
    """Bytes of the log through the end of the Post line, rendered with timestamps."""
    name, _ = pod_path(emu, layout)
    _, container_log = emu.read_log(layout.settings.namespace, name, None)
    text = container_log.render(list(range(len(container_log.records))), timestamps=True)
    return text.index(b"\n", text.index(POST)) + 1


def follower_polls(emu: KubeEmulator, layout: RunLayout) -> int:
    """One GET of the Job per poll."""
    ns = quote(layout.settings.namespace, safe="")
    path = f"/apis/batch/v1/namespaces/{ns}/jobs/{train_job_name(layout)}"
    return sum(1 for r in emu.requests if r.path == path and r.method == "GET")


async def follow(emu: KubeEmulator, layout: RunLayout) -> dict[str, Any]:
    trigger = RewardTrigger(
        cluster_url=emu.url,
        ssl_ca_cert=emu.ca_b64,
        namespace=layout.settings.namespace,
        job_name=train_job_name(layout),
        deadline=time.time() + 600,
        poll_interval=POLL_S,
        pending_timeout=600,
    )
    return await first_event(trigger)


async def reread(emu: KubeEmulator, layout: RunLayout) -> int:
    """The naive baseline: each poll, find the pod and fetch its whole log; count the polls."""
    ns = quote(layout.settings.namespace, safe="")
    tls = ssl.create_default_context(cafile=emu.ca_file)
    headers = {"Authorization": f"Bearer {emu.token}"}
    selector = {"labelSelector": f"job-name={train_job_name(layout)}"}
    polls = 0
    async with aiohttp.ClientSession(emu.url, headers=headers) as http:
        while True:
            polls += 1
            async with http.get(f"/api/v1/namespaces/{ns}/pods", params=selector, ssl=tls) as r:
                pods = (await r.json())["items"]
            for pod in pods:
                log_path = f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}/log"
                async with http.get(log_path, params={"timestamps": "true"}, ssl=tls) as r:
                    if r.status == 200 and POST in await r.read():
                        return polls
            await asyncio.sleep(POLL_S)


async def side_by_side(
    emu: KubeEmulator, ours: RunLayout, naive: RunLayout
) -> tuple[dict[str, Any], int]:
    return await asyncio.gather(follow(emu, ours), reread(emu, naive))


def measure(box: Sandbox, conf: dict[str, Any]) -> dict[str, Any]:
    ours, naive = new_run(box, conf, backend=False), new_run(box, conf, backend=False)
    with Controller(box.emu, scenario(box, conf), time_scale=TIME_SCALE):
        event, naive_polls = asyncio.run(side_by_side(box.emu, ours, naive))
    if event.get("status") != "success":
        raise RuntimeError(f"the follower did not find the Post line: {event}")
    emu = box.emu
    (ours_fetched, ours_requests), ours_produced = fetched(emu, ours), produced(emu, ours)
    (naive_fetched, _), naive_produced = fetched(emu, naive), produced(emu, naive)
    polls = follower_polls(emu, ours)
    return metric(
        ours_fetched / ours_produced,
        naive_fetched / naive_produced,
        unit="ratio",
        goal=GOAL,
        baseline_is="a loop re-reading the whole log every poll (same interval, same script)",
        details={
            "follower": {
                "polls": polls,
                "log_bytes_fetched": ours_fetched,
                "log_bytes_produced": ours_produced,
                "log_requests": ours_requests,
                "bytes_fetched_again": ours_fetched - ours_produced,
            },
            "naive": {
                "polls": naive_polls,
                "log_bytes_fetched": naive_fetched,
                "log_bytes_produced": naive_produced,
            },
            "at_least_50_polls": polls >= MIN_POLLS,
            "poll_interval_s": POLL_S,
            "time_scale": TIME_SCALE,
        },
    )
