"""The triggers' async Kubernetes reads (tpu_rl.kube.async_client) on a client that answers
from a table: errors with their status and retry hint, 404 as absence, bytes counted, a
connection opened only when asked. Over HTTP: tests/integration/test_reward_trigger.py."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import aiohttp
import pytest

from tpu_rl.kube.async_client import (
    AsyncKube,
    KubeApiError,
    OnDemandKube,
    answered,
    api_error,
)


@pytest.mark.parametrize(
    ("status", "transient"),
    [(0, True), (429, True), (500, True), (503, True), (401, False), (403, False), (404, False)],
)
def test_throttling_server_errors_and_no_answer_are_transient(status, transient):
    assert KubeApiError(status, "x").transient is transient


def test_an_error_says_its_status_unless_there_was_no_answer():
    assert str(KubeApiError(403, "GET /x: forbidden")) == "HTTP 403: GET /x: forbidden"
    assert str(KubeApiError(0, "GET /x: TimeoutError")) == "GET /x: TimeoutError"


def test_an_error_takes_the_status_objects_message_and_retry_hint():
    body = json.dumps({"message": "too many requests", "details": {"retryAfterSeconds": 3}})
    error = api_error("GET /x", 429, None, body.encode())
    assert (error.status, error.retry_after) == (429, 3)
    assert str(error) == "HTTP 429: GET /x: too many requests"
    assert api_error("GET /x", 429, " 7 ", body.encode()).retry_after == 7.0  # the header wins


def test_a_body_that_is_no_status_object_is_its_text_cut_short():
    error = api_error("GET /x", 502, "soon", b"<html>" + b"x" * 1000)
    assert str(error).startswith("HTTP 502: GET /x: <html>xxx") and error.retry_after is None
    assert len(str(error)) < 600


@pytest.mark.parametrize("raised", [TimeoutError(), aiohttp.ClientError("reset"), OSError("tls")])
def test_a_request_without_an_answer_is_status_zero(raised):
    with pytest.raises(KubeApiError) as error, answered("GET /x"):
        raise raised
    assert error.value.status == 0 and error.value.transient
    assert str(error.value).startswith(f"GET /x: {type(raised).__name__}")


class Response:
    """aiohttp's response as call_api returns it unread."""

    def __init__(self, status: int, body: Any) -> None:
        self.status, self.headers = status, {}
        self.data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.closed = False

    async def read(self) -> bytes:
        return self.data

    def close(self) -> None:
        self.closed = True

    async def __aenter__(self) -> Response:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class Client:
    """ApiClient.call_api answering (status, body) by path; the requests made."""

    def __init__(self, answers: dict[str, tuple[int, Any]]) -> None:
        self.answers, self.requests = answers, []

    async def call_api(self, path: str, method: str, **kwargs: Any) -> Response:
        self.requests.append((method, path, kwargs["query_params"], kwargs["body"]))
        return Response(*self.answers[path])


async def test_a_read_is_its_json_and_its_bytes_are_counted():
    client = Client({"/p": (200, {"items": [{"a": 1}]})})
    api = AsyncKube(client)
    assert await api.list_items("/p", "app=x") == [{"a": 1}]
    assert client.requests == [("GET", "/p", [("labelSelector", "app=x")], None)]
    assert api.bytes_read == len(json.dumps({"items": [{"a": 1}]}))


async def test_an_object_that_does_not_exist_is_none_and_other_errors_are_raised():
    api = AsyncKube(Client({"/gone": (404, {"message": "not found"}), "/no": (403, b"no")}))
    assert await api.get_optional("/gone") is None
    with pytest.raises(KubeApiError) as error:
        await api.get_optional("/no")
    assert error.value.status == 403 and str(error.value) == "HTTP 403: GET /no: no"


async def test_a_delete_is_foreground_and_a_gone_object_is_its_404():
    client = Client({"/j": (200, {}), "/gone": (404, {})})
    api = AsyncKube(client)
    assert await api.delete("/j") == 200 and await api.delete("/gone") == 404
    assert client.requests[0] == ("DELETE", "/j", [], {"propagationPolicy": "Foreground"})


async def test_an_on_demand_client_connects_at_its_first_request_only():
    client, connects = Client({"/p": (200, {"items": []})}), []

    @contextlib.asynccontextmanager
    async def connect():
        connects.append(1)
        yield client

    async with contextlib.AsyncExitStack() as stack:
        api = OnDemandKube(connect, stack)
        assert connects == [] and api.client is None
        await api.list_items("/p", "a=b")
        await api.list_items("/p", "a=b")
        assert connects == [1] and api.client is client
