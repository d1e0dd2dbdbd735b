"""PodsThenJobTrigger: the pods wait, then the Job's end, watched, then the provider's Job wait,
naming host 0's pod only (the operator reads and logs one pod of a multi-host Job, not one per
host)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from sandbox.kube_emulator import KubeEmulator
from tests.support.kube_wait import JOB, NS, make_job, make_pod
from tpu_rl.jobs.job_trigger import COMPLETION_INDEX, PodsThenJobTrigger
from tpu_rl.kube import objects as kube

CONNECTION = {"gcp_conn_id": "google_cloud_default", "impersonation_chain": None,
              "use_dns_endpoint": False}  # fmt: skip
HOSTS = 4


def trigger(
    cluster: KubeEmulator, job_poll_s: float = 0.05, hosts: int = HOSTS
) -> PodsThenJobTrigger:
    connection = {"cluster_url": cluster.url, "ssl_ca_cert": cluster.ca_b64, **CONNECTION}
    pods = {
        "namespace": NS,
        "what": f"Job {JOB}",
        "owner_path": kube.job_path(NS, JOB),
        "selector": f"job-name={JOB}",
        "expected": hosts,
        "deadline": time.time() + 30,
        "poll_interval": 0.05,
    }
    job = {"job_name": JOB, "job_namespace": NS, "base_container_name": "workload-container",
           "poll_interval": job_poll_s, "get_logs": True, "do_xcom_push": False}  # fmt: skip
    return PodsThenJobTrigger(pods=pods, job=job, **connection)


async def test_the_job_event_names_host_0s_pod_only(emu, creds):
    make_job(emu)
    # created out of order, host 0 neither first nor first by name
    for index, name in ((2, "a-pod"), (0, "z-pod"), (3, "b-pod"), (1, "c-pod")):
        make_pod(emu, name, labels={"job-name": JOB, COMPLETION_INDEX: str(index)})
    emu.set_job_condition(NS, JOB, "Complete")
    payload: dict[str, Any] = {}
    async for event in trigger(emu).run():
        payload = event.payload
        break
    assert payload["status"] == "success" and payload["pod_names"] == ["z-pod"]


async def test_the_jobs_end_is_seen_at_once_not_a_poll_later(emu, creds):
    """The provider's Job trigger samples every poll interval (30 s here); the end is watched,
    so the TPU slice is free for the next step within a second of the Job's end."""
    make_job(emu)
    make_pod(emu, "only-pod", labels={"job-name": JOB, COMPLETION_INDEX: "0"})
    ending = threading.Timer(0.5, lambda: emu.set_job_condition(NS, JOB, "Complete"))
    ending.start()
    started = time.monotonic()
    async with asyncio.timeout(10):
        async for event in trigger(emu, job_poll_s=30, hosts=1).run():
            assert event.payload["status"] == "success"
            break
    assert 0.5 <= time.monotonic() - started < 15  # not the 30-s poll
    ending.join()
