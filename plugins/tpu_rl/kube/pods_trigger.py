"""PodsReadyTrigger: wait in the triggerer until a Job's or JobSet's pods exist or run.

The capacity waits (TPU nodes, Kueue admission) can take longer than anything else in a run;
the operators defer them here instead of sleeping in a worker slot. Watches on the pods and
their owner end the wait the moment the last pod is ready or one fails.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from airflow.triggers.base import TriggerEvent

from tpu_rl.kube import kueue_rules, verdicts
from tpu_rl.kube import objects as kube
from tpu_rl.kube.async_client import AsyncKube, KubeApiError
from tpu_rl.kube.gke_trigger import GkeTrigger, connection_of
from tpu_rl.kube.watch import news_or_timeout, watching


class PodsReadyTrigger(GkeTrigger):
    """Fires {"status": "success"} once `expected` pods matching `selector` exist and are
    scheduled (or run, with `need_running`); {"status": "error", "reason", "message"} when the
    owner (`owner_path`, a Job or JobSet) or a pod fails, the owner is gone, Kueue can never
    admit the owner's Workload (`queued`; reason verdicts.KUEUE_REFUSED), or `deadline`
    (epoch s) passes first (its message ends with the first pending pod's reason)."""

    def __init__(
        self,
        *,
        cluster_url: str,
        ssl_ca_cert: str,
        namespace: str,
        what: str,
        owner_path: str,
        selector: str,
        expected: int,
        deadline: float,
        need_running: bool = False,
        poll_interval: float = 30.0,
        gcp_conn_id: str = "google_cloud_default",
        impersonation_chain: str | Sequence[str] | None = None,
        use_dns_endpoint: bool = False,
        queued: bool = False,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Airflow: unannotated
        self.kwargs = {
            "cluster_url": cluster_url,
            "ssl_ca_cert": ssl_ca_cert,
            "namespace": namespace,
            "what": what,
            "owner_path": owner_path,
            "selector": selector,
            "expected": expected,
            "deadline": deadline,
            "need_running": need_running,
            "poll_interval": poll_interval,
            "gcp_conn_id": gcp_conn_id,
            "impersonation_chain": impersonation_chain,
            "use_dns_endpoint": use_dns_endpoint,
            "queued": queued,
        }

    @classmethod
    def for_operator(
        cls, operator: Any, owner: tuple[str, str, str], selector: str, expected: int, **kwargs: Any
    ) -> PodsReadyTrigger:
        """The trigger on a GKE operator's cluster and credentials (GKEOperatorMixin), for the
        pods of `owner`: ("Job" or "JobSet", namespace, name)."""
        kind, namespace, name = owner
        path = kube.job_path if kind == "Job" else kube.jobset_path
        return cls(
            **connection_of(operator),
            namespace=namespace,
            what=f"{kind} {name}",
            owner_path=path(namespace, name),
            selector=selector,
            expected=expected,
            **kwargs,
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        k, news = self.kwargs, asyncio.Event()
        collection, name = k["owner_path"].rsplit("/", 1)
        watched = [
            (kube.pods_path(k["namespace"]), [("labelSelector", k["selector"])]),
            (collection, [("fieldSelector", f"metadata.name={name}")]),
        ]
        async with watching(self.hook.get_conn, watched, news, self.log):
            payload = await self._wait(news)
        yield TriggerEvent(payload)

    async def _wait(self, news: asyncio.Event) -> dict[str, Any]:
        k, said = self.kwargs, None
        while True:
            news.clear()
            try:
                failure, waiting = await self._check()
            except KubeApiError as error:
                if not error.transient and error.status != 401:
                    return {"status": "error", "message": f"Kubernetes API error: {error}"}
                self.log.warning("Kubernetes API: %s; checking again later", error)
                failure, waiting = None, said or "the Kubernetes API is failing"
            if failure is not None:
                return {"status": "error", "reason": failure[0], "message": failure[1]}
            if waiting is None:
                self.log.info("%s: all %d pods ready.", k["what"], k["expected"])
                return {"status": "success"}
            if waiting != said:
                self.log.info("Waiting: %s: %s", k["what"], waiting)
                said = waiting
            remaining = k["deadline"] - time.time()
            if remaining <= 0:
                counts, _, reason = waiting.partition("; ")
                ready = counts.split()[0]  # "n/expected"
                state = "pods running after" if k["need_running"] else "pods scheduled after"
                message = f"{k['what']}: {ready} {state} the pending timeout ({reason})"
                return {"status": "error", "reason": "pending_timeout", "message": message}
            await news_or_timeout(news, min(k["poll_interval"], remaining))

    async def _check(self) -> tuple[verdicts.Failure | None, str | None]:
        k = self.kwargs
        owner_name = k["owner_path"].rsplit("/", 1)[1]
        owner_kind = "JobSet" if "/jobsets/" in k["owner_path"] else "Job"
        async with self.hook.get_conn() as client:
            api = AsyncKube(client)
            owner = await api.get_optional(k["owner_path"])
            pods = await api.list_items(kube.pods_path(k["namespace"]), k["selector"])
            workloads = await self._workloads(api) if k["queued"] and owner else []
        if refusal := verdicts.kueue_refusal(k["what"], workloads, owner_kind, owner_name):
            return refusal, None
        return verdicts.pods_verdict(k["what"], owner, pods, k["expected"], k["need_running"])

    async def _workloads(self, api: AsyncKube) -> list[dict[str, Any]]:
        """The namespace's Kueue Workloads; none when Kueue is not installed (404)."""
        path = kueue_rules.workloads_path(self.kwargs["namespace"])
        try:
            return (await api.get_json(path)).get("items") or []
        except KubeApiError as error:
            if error.status == 404:
                return []
            raise
