"""The wait until deleted objects are gone (tpu_rl.kube.removed_trigger), its reads of the
cluster replaced by a list of answers. Against the API emulator:
tests/integration/test_removed_trigger.py."""

from __future__ import annotations

from typing import Any

from tpu_rl.kube.async_client import KubeApiError
from tpu_rl.kube.removed_trigger import RemovedTrigger

OBJECTS = {"Job job-x": "/apis/batch/v1/namespaces/ns/jobs/job-x", "JobSet b": "/js/b"}


def trigger(answers: list[Any], deadline: float) -> RemovedTrigger:
    """A RemovedTrigger whose successive reads answer `answers` (a list left, or an error)."""
    made = RemovedTrigger(
        objects=OBJECTS, deadline=deadline, poll_interval=0.0, cluster_url="u", ssl_ca_cert="c"
    )

    async def left() -> list[str]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    made._left = left  # type: ignore[method-assign]
    return made


async def events(made: RemovedTrigger) -> list[dict]:
    return [event.payload async for event in made.run()]


async def test_it_fires_success_once_nothing_is_left_reading_through_transient_errors():
    made = trigger([["Job job-x"], KubeApiError(503, "busy"), KubeApiError(401, "token"), []], 1e12)
    assert await events(made) == [{"status": "success"}]


async def test_a_lasting_api_error_ends_the_wait():
    made = trigger([KubeApiError(403, "forbidden")], 1e12)
    assert await events(made) == [
        {"status": "error", "message": "Kubernetes API: HTTP 403: forbidden"}
    ]


async def test_past_its_deadline_it_names_what_is_left():
    made = trigger([["Job job-x", "JobSet b"]], 0.0)
    assert await events(made) == [
        {"status": "error", "message": "Job job-x and JobSet b not deleted in time"}
    ]


def test_it_serializes_with_its_objects_and_connection():
    path, kwargs = trigger([], 5.0).serialize()
    assert path == "tpu_rl.kube.removed_trigger.RemovedTrigger"
    assert kwargs["objects"] == OBJECTS and kwargs["cluster_url"] == "u"
    assert RemovedTrigger(**kwargs).kwargs == kwargs
