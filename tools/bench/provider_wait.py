"""The baseline of the bench's detection figures: the provider's own GKEJobTrigger (what the
deferrable `GKEStartJobOperator(wait_until_job_complete=True)` defers on), with its default
`job_poll_interval`, on a twin of the run's training Job; PHASES copies a fraction of a poll
apart."""

from __future__ import annotations

import asyncio
import copy
import inspect
import threading
import time
from typing import Any

from airflow.providers.google.cloud.operators.kubernetes_engine import GKEStartJobOperator

from sandbox.kube_emulator import KubeEmulator
from tpu_rl.layout import RUN_LABEL

MANAGED_BY = "app.kubernetes.io/managed-by"
PROVIDER_POLL_S: float = (
    inspect.signature(GKEStartJobOperator.__init__).parameters["job_poll_interval"].default
)
PHASES = 5


def twin_job(job: dict[str, Any]) -> dict[str, Any]:
    """The training Job again under another name and run label, without the package's label."""
    twin = copy.deepcopy(job)
    meta = twin["metadata"]
    for key in ("uid", "resourceVersion", "creationTimestamp", "generation"):
        meta.pop(key, None)
    twin.pop("status", None)
    meta["name"] += "-twin"
    for labels in (meta["labels"], twin["spec"]["template"]["metadata"]["labels"]):
        labels.pop(MANAGED_BY, None)
        labels[RUN_LABEL] = "bench-twin"
    twin["spec"].pop("selector", None)  # the Job controller's own, from the first Job's uid
    template_labels = twin["spec"]["template"]["metadata"]["labels"]
    for key in [k for k in template_labels if "controller-uid" in k or k.endswith("job-name")]:
        del template_labels[key]
    return twin


class ProviderWait:
    """PHASES copies of GKEJobTrigger on the training Job, started a fraction of a poll apart."""

    def __init__(self, emu: KubeEmulator) -> None:
        self.emu = emu
        self.fired: list[tuple[float, str]] = []  # (epoch seconds, status)
        self.twin = ""
        self.started_at: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="bench-provider-wait", daemon=True)

    def __enter__(self) -> ProviderWait:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Let the copies still polling see the Job's end (a poll and a phase at most)."""
        deadline = time.monotonic() + 2 * PROVIDER_POLL_S + 5
        while len(self.fired) < PHASES:
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self._stop.set()
        self._thread.join(5)

    def _train_job(self) -> dict[str, Any] | None:
        while not self._stop.is_set():
            jobs = [j for j in self.emu.list("jobs") if "-train" in j["metadata"]["name"]]
            if jobs:
                return jobs[0]
            time.sleep(0.05)
        return None

    def _main(self) -> None:
        job = self._train_job()
        if job is not None:
            twin = self.emu.create(twin_job(job))
            self.twin = twin["metadata"]["name"]
            asyncio.run(self._wait_all(self.twin, twin["metadata"]["namespace"]))

    async def _wait_all(self, name: str, namespace: str) -> None:
        tasks = [asyncio.create_task(self._wait(name, namespace, i)) for i in range(PHASES)]
        while not self._stop.is_set() and not all(t.done() for t in tasks):
            await asyncio.sleep(0.1)
        for task in tasks:
            task.cancel()

    async def _wait(self, name: str, namespace: str, phase: int) -> None:
        from airflow.providers.google.cloud.triggers.kubernetes_engine import GKEJobTrigger

        await asyncio.sleep(PROVIDER_POLL_S * phase / PHASES)
        self.started_at.append(time.time())
        trigger = GKEJobTrigger(
            cluster_url=self.emu.url,
            ssl_ca_cert=self.emu.ca_b64,
            job_name=name,
            job_namespace=namespace,
            pod_names=[],
            pod_namespace=namespace,
            base_container_name="workload-container",
            get_logs=False,
            poll_interval=PROVIDER_POLL_S,
        )
        async for event in trigger.run():
            self.fired.append((time.time(), event.payload["status"]))
            return
