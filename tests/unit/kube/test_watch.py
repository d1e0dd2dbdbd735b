"""Kubernetes watches that wake a trigger (tpu_rl.kube.watch): what a watch vouches for, which
events are news, one watch request's events and the version it resumes from. A watch against
the API emulator: tests/unit/kube/test_shared_watch.py."""

from __future__ import annotations

import asyncio
from typing import Any

from tpu_rl.kube.watch import (
    Freshness,
    OneTrigger,
    StatusChanges,
    _watch_once,
    news_or_timeout,
)


def test_a_watch_vouches_for_the_last_read_only_while_it_is_live_without_a_gap():
    fresh = Freshness()
    assert fresh.take() is True  # never read
    fresh.opened(resumed=False)
    assert fresh.take() is True  # started afresh: a change may have been missed
    assert fresh.take() is False  # live, nothing changed since
    fresh.opened(resumed=True)
    assert fresh.take() is False  # resumed without a gap
    fresh.down()
    assert fresh.take() is True and fresh.take() is True  # down: read on every poll


def pod(uid: str, phase: str, label: str = "a") -> dict[str, Any]:
    return {"metadata": {"uid": uid, "labels": {"l": label}}, "status": {"phase": phase}}


def test_only_a_change_of_status_or_suspension_is_news():
    changes = StatusChanges()
    assert changes.news("ADDED", pod("1", "Pending"))
    assert not changes.news("MODIFIED", pod("1", "Pending", label="b"))  # labels are not news
    assert changes.news("MODIFIED", pod("1", "Running"))
    assert changes.news("ADDED", pod("2", "Running"))  # another object
    suspended = {**pod("1", "Running"), "spec": {"suspend": True}}
    assert changes.news("MODIFIED", suspended)
    assert changes.news("DELETED", suspended) and "1" not in changes.seen
    changes.forget(pod("2", "Running"))
    assert changes.news("MODIFIED", pod("2", "Running"))  # forgotten: news again


async def test_a_triggers_watch_sets_its_event_and_marks_its_objects_changed():
    news, fresh = asyncio.Event(), Freshness()
    trigger = OneTrigger(news, fresh)
    trigger.opened(resumed=False)
    fresh.take()
    trigger.saw("ADDED", pod("1", "Pending"))
    assert news.is_set() and fresh.changed
    news.clear(), fresh.take()
    trigger.saw("MODIFIED", pod("1", "Pending", label="b"))
    assert not news.is_set() and not fresh.changed


class Events:
    """AsyncKube.watch over a list of events; the queries asked."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events, self.queries = events, []

    async def watch(self, path: str, query: list[tuple[str, str]], opened: Any) -> Any:
        self.queries.append(query)
        opened()
        for event in self.events:
            yield event


class Sink:
    """A WatchSink recording what it was told."""

    def __init__(self) -> None:
        self.told: list[Any] = []

    def opened(self, resumed: bool) -> None:
        self.told.append(("opened", resumed))

    def down(self) -> None:
        self.told.append("down")

    def saw(self, kind: str, obj: dict[str, Any]) -> None:
        self.told.append((kind, obj["metadata"]["name"]))


def event(kind: str, name: str, version: str) -> dict[str, Any]:
    return {"type": kind, "object": {"metadata": {"name": name, "resourceVersion": version}}}


async def test_a_watch_request_resumes_from_the_last_version_it_saw():
    api, sink = Events([event("ADDED", "a", "5"), event("MODIFIED", "a", "9")]), Sink()
    watched = ("/api/v1/namespaces/ns/pods", [("labelSelector", "job-name=j")])
    assert await _watch_once(api, watched, "3", sink) == "9"
    assert api.queries == [[("labelSelector", "job-name=j"), ("resourceVersion", "3")]]
    assert sink.told == [("opened", True), ("ADDED", "a"), ("MODIFIED", "a")]


async def test_an_error_event_ends_the_request_to_list_afresh():
    api = Events([event("ADDED", "a", "5"), {"type": "ERROR", "object": {"code": 410}}])
    sink = Sink()
    assert await _watch_once(api, ("/p", []), None, sink) is None
    assert api.queries == [[]]  # no version: from now
    assert sink.told == [("opened", False), ("ADDED", "a"), "down"]


async def test_the_wait_ends_on_news_or_at_its_timeout():
    news = asyncio.Event()
    assert await news_or_timeout(news, 0.0) is False
    assert await news_or_timeout(news, -5.0) is False
    news.set()
    assert await news_or_timeout(news, 60.0) is True
