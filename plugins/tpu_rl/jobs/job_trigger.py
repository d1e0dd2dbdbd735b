"""PodsThenJobTrigger: a Job's wait for capacity, then for its end, in one deferral.

A conversion or export whose pods wait for TPU capacity or Kueue would otherwise defer twice
(the pods, then the provider's Job wait), and a worker would run the task three times. The end
is watched, not sampled: the provider's trigger looks once every poll interval, and every
second after the Job's end keeps the TPU slice idle before the next step can use it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from airflow.providers.google.cloud.triggers.kubernetes_engine import GKEJobTrigger
from airflow.triggers.base import TriggerEvent

from tpu_rl.kube import objects as kube
from tpu_rl.kube.async_client import AsyncKube, KubeApiError
from tpu_rl.kube.gke_trigger import CONNECTION_KEYS, GkeTrigger
from tpu_rl.kube.pods_trigger import PodsReadyTrigger
from tpu_rl.kube.watch import news_or_timeout, watching

if TYPE_CHECKING:
    from kubernetes.client import V1Job

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
ENDED = {"Complete", "Failed"}  # a Job's terminal conditions


class PodsThenJobTrigger(GkeTrigger):
    """Waits as PodsReadyTrigger (`pods`: its own kwargs) until the Job's pods exist and are
    scheduled, then as the provider's GKEJobTrigger (`job`: its own kwargs but the pod names,
    read once the pods exist) until the Job ends, and fires that trigger's event. A failed
    pods wait fires its own event with `pods_wait: True`, the Job's name and no `job`."""

    def __init__(self, *, pods: dict[str, Any], job: dict[str, Any], **connection: Any) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Airflow: unannotated
        self.kwargs = {"pods": dict(pods), "job": dict(job), **connection}

    @classmethod
    def around(cls, waiting: PodsReadyTrigger, job: dict[str, Any]) -> PodsThenJobTrigger:
        """The pods wait `waiting`, then the Job wait with these GKEJobTrigger kwargs."""
        connection = {key: waiting.kwargs[key] for key in CONNECTION_KEYS}
        pods = {k: v for k, v in waiting.kwargs.items() if k not in CONNECTION_KEYS}
        return cls(pods=pods, job=job, **connection)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        k = self.kwargs
        connection = {key: k[key] for key in CONNECTION_KEYS}
        waited: dict[str, Any] = {"status": "error", "message": "the pods wait ended silently"}
        async for event in PodsReadyTrigger(**k["pods"], **connection).run():
            waited = event.payload
            break
        job, namespace = k["job"], k["pods"]["namespace"]
        if waited.get("status") != "success":
            name = {"name": job["job_name"], "namespace": namespace, "job": None}
            yield TriggerEvent({**waited, **name, "pods_wait": True})
            return
        async with self.hook.get_conn() as client:
            pods = await AsyncKube(client).list_items(
                kube.pods_path(namespace), k["pods"]["selector"]
            )
        names = host_zero([pod["metadata"] for pod in pods])
        await self._until_ended(namespace, job["job_name"], job["poll_interval"])
        trigger = GKEJobTrigger(**job, pod_names=names, pod_namespace=namespace, **connection)
        async for event in trigger.run():
            yield event
            return

    async def _until_ended(self, namespace: str, name: str, poll_interval: float) -> None:
        """Watch the Job until it has ended (or is gone, or the API fails for good), so the
        provider's trigger, which reports it, sees the end on its first look."""
        news = asyncio.Event()
        watched = [(kube.jobs_path(namespace), [("fieldSelector", f"metadata.name={name}")])]
        async with watching(self.hook.get_conn, watched, news, self.log):
            while True:
                news.clear()
                try:
                    async with self.hook.get_conn() as client:
                        found = await AsyncKube(client).get_optional(kube.job_path(namespace, name))
                except KubeApiError as error:
                    if not error.transient:
                        return
                    found = {}
                if found is None or ENDED & set(kube.true_conditions(found)):
                    return
                await news_or_timeout(news, poll_interval)


def host_zero(metas: list[dict[str, Any]]) -> list[str]:
    """The name of host 0's pod among these pods' metadata (none without pods): the task log
    shows its log (the Job's command runs there; the other hosts exit at once), and the
    operator reads one pod, not one per host."""
    return [min(metas, key=_host_order)["name"]] if metas else []


def job_ended(job: V1Job) -> bool:
    """The Job has a True Complete or Failed condition."""
    return bool(ENDED & _true_types(job))


def ended_job_event(job: V1Job, pod_names: list[str] | None) -> dict[str, Any]:
    """The event GKEJobTrigger fires for this ended Job (the google provider's
    triggers/kubernetes_engine.py, GKEJobTrigger.run: `status` "error" with the Failed
    condition's reason, else "success"; `pod_names` None without get_logs; no sidecar XCom,
    the Job steps' `do_xcom_push` being False)."""
    failed = next(
        (c for c in job.status.conditions if c.type == "Failed" and c.status == "True"), None
    )
    namespace = job.metadata.namespace
    message = f"Job failed with error: {failed.reason}" if failed else "Job completed successfully"
    return {
        "name": job.metadata.name,
        "namespace": namespace,
        "pod_names": pod_names,
        "pod_namespace": namespace if pod_names is not None else None,
        "status": "error" if failed else "success",
        "message": message,
        "job": job.to_dict(),
        "xcom_result": None,
    }


def _true_types(job: V1Job) -> set[str]:
    return {c.type for c in (job.status and job.status.conditions) or [] if c.status == "True"}


def _host_order(meta: dict[str, Any]) -> tuple[int, str]:
    """Sort key of an indexed Job's pods (their metadata): by completion index, host 0 first,
    then by name."""
    index = (meta.get("labels") or {}).get(COMPLETION_INDEX) or (meta.get("annotations") or {}).get(
        COMPLETION_INDEX, ""
    )
    return (int(index) if index.isdigit() else 1 << 30, meta["name"])
