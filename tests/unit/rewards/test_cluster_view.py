"""What the reward poll last read of the cluster (tpu_rl.rewards.cluster_view): read again on a
watch's news, with the watch down, or every REREAD_S; the latest events of a pod."""

from __future__ import annotations

from typing import Any

from tpu_rl.kube.async_client import KubeApiError
from tpu_rl.rewards import cluster_view
from tpu_rl.rewards.cluster_view import ClusterView


class Reads:
    """AsyncKube's reads, answering by path and counting them."""

    def __init__(self, events: list[dict] | None = None) -> None:
        self.paths: list[str] = []
        self.events = events

    async def get_optional(self, path: str) -> dict[str, Any] | None:
        self.paths.append(path)
        return {"metadata": {"name": path.rsplit("/", 1)[1]}}

    async def list_items(self, path: str, selector: str) -> list[dict]:
        self.paths.append(f"{path}?{selector}")
        return [{"metadata": {"name": "p"}}]

    async def get_json(self, path: str, query: Any = None) -> dict:
        if self.events is None:
            raise KubeApiError(403, "events: forbidden")
        return {"items": self.events}


def live_view() -> ClusterView:
    """A view whose watches are open and have vouched for the first read."""
    view = ClusterView("ns", "job-train", "rl-backend")
    for fresh in view.watched.all():
        fresh.opened(resumed=True)
    return view


async def test_a_poll_with_nothing_new_reads_nothing_again(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(cluster_view.time, "monotonic", lambda: clock[0])
    view, api = live_view(), Reads()
    view.start_poll()
    await view.job(api), await view.pods(api), await view.backend(api)
    assert len(api.paths) == 4  # the Job, its pods, the JobSet and its pods
    clock[0] += 10
    view.start_poll()
    job = await view.job(api)
    await view.pods(api), await view.backend(api)
    assert len(api.paths) == 4 and job == {"metadata": {"name": "job-train"}}
    clock[0] += cluster_view.REREAD_S
    view.start_poll()
    await view.job(api)
    assert len(api.paths) == 5  # the backstop


async def test_news_of_one_watch_reads_its_objects_only(monkeypatch):
    monkeypatch.setattr(cluster_view.time, "monotonic", lambda: 1000.0)
    view, api = live_view(), Reads()
    view.start_poll()
    await view.job(api), await view.pods(api)
    view.start_poll()
    view.watched.pods.changed = True
    await view.job(api), await view.pods(api)
    assert api.paths[-1] == "/api/v1/namespaces/ns/pods?job-name=job-train" and len(api.paths) == 3
    await view.pods(api, again=True)
    assert len(api.paths) == 4
    view.forget()
    await view.job(api)
    assert len(api.paths) == 5


async def test_the_latest_three_events_are_said_and_a_refusal_is_named():
    events = [
        {"reason": "Scheduled", "message": "m1", "lastTimestamp": "2027-01-01T00:00:01Z"},
        {"reason": "Pulled", "message": "m0", "lastTimestamp": "2027-01-01T00:00:00Z"},
        {"reason": "Started", "message": "", "eventTime": "2027-01-01T00:00:03Z"},
        {"reason": "Killing", "message": "m2", "lastTimestamp": "2027-01-01T00:00:02Z"},
    ]
    view = ClusterView("ns", "job-train", None)
    pod = {"metadata": {"name": "job-train-0"}}
    assert await view.events(Reads(events), pod) == "Scheduled: m1; Killing: m2; Started"
    said = await view.events(Reads(None), None)
    assert said == "(events not available: HTTP 403: events: forbidden)"
