"""log_read_amplification: log bytes the follower fetched / log bytes the training produced.

Two identical training runs side by side in one sandbox: one followed by the product's
RewardTrigger, the other by the provider's own incremental log following, the
KubernetesPodOperator's `PodManager.fetch_container_logs(follow=True)`, which keeps one stream
open and reconnects from the last timestamp it saw. Bytes are the `response_bytes` of the
emulator's `/log` requests; produced bytes are the log through the Post line, rendered with
timestamps (the form both ask for).

Then a burst: a training pod writes BURST_BYTES of log at once, then its Post line; the
follower must reach the Post line within one poll interval of the burst.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any
from urllib.parse import quote

from sandbox.controller import Controller, Scenario
from sandbox.harness import Sandbox
from sandbox.kube_emulator import KubeEmulator
from sandbox.pod_scripts import PodScript, exit, log, sleep
from sandbox.workloads import EvalResult, absl
from tools.bench.metric import metric
from tools.bench.workload import new_run, scenario, train_job_name, wait_end
from tpu_rl.jobs import manifests
from tpu_rl.layout import RunLayout

GOAL = 1.05
TIME_SCALE = 0.003  # 3110 simulated seconds of training: about 9 s
POLL_S = 10.0  # production-like: the follower's timer poll
POST = b"Post RL Training:"
BURST_BYTES = 16 * 1024 * 1024
BURST_LINE = "I1129 10:00:00.000000 1 train_rl.py:1] " + "x" * 980 + "\n"


def pod_name(emu: KubeEmulator, layout: RunLayout) -> str:
    """The run's only training pod."""
    (pod,) = emu.list("pods", layout.settings.namespace, f"job-name={train_job_name(layout)}")
    return pod["metadata"]["name"]


def fetched(emu: KubeEmulator, layout: RunLayout, since_request: int = 0) -> tuple[int, int]:
    """(bytes, requests) of the GETs of the run's pod log, from request number `since_request`."""
    ns = quote(layout.settings.namespace, safe="")
    path = f"/api/v1/namespaces/{ns}/pods/{pod_name(emu, layout)}/log"
    sizes = [
        r.response_bytes
        for r in emu.requests[since_request:]
        if r.path == path and r.method == "GET"
    ]
    return sum(sizes), len(sizes)


def produced(emu: KubeEmulator, layout: RunLayout, *, through_post: bool) -> int:
    """Bytes of the log (through the end of the Post line, or all), rendered with timestamps."""
    _, container_log = emu.read_log(layout.settings.namespace, pod_name(emu, layout), None)
    text = container_log.render(list(range(len(container_log.records))), timestamps=True)
    return text.index(b"\n", text.index(POST)) + 1 if through_post else len(text)


def provider_follow(emu: KubeEmulator, layout: RunLayout, stop: threading.Event) -> None:
    """KubernetesPodOperator's log following (sync PodManager, follow=True) until the pod ends."""
    from airflow.providers.cncf.kubernetes.utils.pod_manager import PodManager
    from kubernetes import client

    # its pod's lines go to Airflow's log at warning level: not into the bench's output
    logging.getLogger("airflow.providers.cncf.kubernetes.utils.pod_manager").setLevel(logging.ERROR)
    config = client.Configuration(host=emu.url)
    config.ssl_ca_cert = emu.ca_file
    config.api_key = {"authorization": f"Bearer {emu.token}"}
    api = client.CoreV1Api(client.ApiClient(config))
    ns, selector = layout.settings.namespace, f"job-name={train_job_name(layout)}"
    while not stop.is_set():
        pods = api.list_namespaced_pod(ns, label_selector=selector).items
        if pods and (pods[0].status.phase or "Pending") != "Pending":
            PodManager(kube_client=api).fetch_container_logs(
                pods[0], manifests.CONTAINER, follow=True, post_termination_timeout=1
            )
            return
        time.sleep(0.2)


async def side_by_side(
    emu: KubeEmulator, ours: RunLayout, twin: RunLayout, deferred: list[Any]
) -> dict[str, Any]:
    stop = threading.Event()
    provider = asyncio.create_task(asyncio.to_thread(provider_follow, emu, twin, stop))
    try:
        return await wait_end(emu, ours, POLL_S, deferred)
    finally:
        await provider  # the provider's follow ends when its container does
        stop.set()


def burst_scenario(box: Sandbox, conf: dict[str, Any]) -> Scenario:
    """The training pod logs a Pre line, BURST_BYTES in one write, then its Post line."""
    pre, post = EvalResult(corr=8, mean_reward=0.0821), EvalResult(corr=12, mean_reward=0.1234)
    burst = BURST_LINE * (BURST_BYTES // len(BURST_LINE))
    steps = [
        log(absl("W", f"Pre RL Training: {pre.fields()}")),
        sleep(2000),
        log(burst),
        log(absl("W", f"Post RL Training: {post.fields()}")),
        sleep(600),
        exit(0),
    ]
    return Scenario().on("-train", PodScript(steps))


def burst(box: Sandbox, conf: dict[str, Any]) -> dict[str, Any]:
    """Seconds from the end of the burst to the follower's event, and the bytes it took."""
    layout = new_run(box, conf, backend=False)
    before = len(box.emu.requests)
    with Controller(box.emu, burst_scenario(box, conf), time_scale=TIME_SCALE):
        event = asyncio.run(wait_end(box.emu, layout, POLL_S))
        ended = time.time()
    if event.get("status") != "success":
        raise RuntimeError(f"the follower did not find the Post line after the burst: {event}")
    deadline = time.monotonic() + 5  # the emulator records a stream when it sees the client go
    while not fetched(box.emu, layout, before)[1] and time.monotonic() < deadline:
        time.sleep(0.05)
    _, container_log = box.emu.read_log(layout.settings.namespace, pod_name(box.emu, layout), None)
    post_record = next(r for r in container_log.records if "Post RL Training:" in r.text)
    return {
        "burst_bytes": BURST_BYTES,
        "post_line_to_event_s": round(ended - post_record.at.timestamp(), 3),
        "within_one_poll": ended - post_record.at.timestamp() <= POLL_S,
        "log_bytes_fetched": fetched(box.emu, layout, before)[0],
    }


def measure(box: Sandbox, conf: dict[str, Any]) -> dict[str, Any]:
    ours, twin = new_run(box, conf, backend=False), new_run(box, conf, backend=False)
    deferred: list[Any] = []
    with Controller(box.emu, scenario(box, conf), time_scale=TIME_SCALE):
        event = asyncio.run(side_by_side(box.emu, ours, twin, deferred))
    if event.get("status") != "success":
        raise RuntimeError(f"the follower did not find the Post line: {event}")
    emu = box.emu
    ours_fetched, ours_requests = fetched(emu, ours)
    ours_produced = produced(emu, ours, through_post=True)  # it stops at the Post line
    twin_fetched, twin_requests = fetched(emu, twin)
    twin_produced = produced(emu, twin, through_post=False)  # it follows to the container's end
    burst_result = burst(box, conf)
    entry = metric(
        ours_fetched / ours_produced,
        twin_fetched / twin_produced,
        unit="ratio",
        goal=GOAL,
        baseline_is=(
            "KubernetesPodOperator's log following (PodManager.fetch_container_logs, "
            "follow=True) on a twin run of the same script"
        ),
        details={
            "follower": {
                "log_bytes_fetched": ours_fetched,
                "log_bytes_produced": ours_produced,
                "log_requests": ours_requests,
                # each progress report ends a trigger; the next resumes from sinceTime, which
                # has whole seconds (Kubernetes' PodLogOptions): the ending trigger reads on to
                # a chunk that begins a new second (tpu_rl.rewards.pod_log.PodLogReader.settle),
                # so the next fetches about one line again
                "progress_reports": len(deferred) - 1,
            },
            "provider_follow": {
                "log_bytes_fetched": twin_fetched,
                "log_bytes_produced": twin_produced,
                "log_requests": twin_requests,
                "note": "it follows to the container's end, a few lines past the Post line",
            },
            "burst": burst_result,
            "poll_interval_s": POLL_S,
            "time_scale": TIME_SCALE,
        },
    )
    entry["goal_met"] = entry["goal_met"] and burst_result["within_one_poll"]
    entry["goal"] += f" and a {BURST_BYTES >> 20} MiB burst consumed within one poll"
    return entry
