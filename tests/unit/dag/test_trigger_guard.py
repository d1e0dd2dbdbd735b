"""tpu_rl.dag.trigger_guard: a trigger of the run DAG naming an unknown setting is refused with a
400 before the run exists; every other request passes on untouched."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tpu_rl.dag.trigger_guard import TRIGGER_PATH, UnknownSettingsGuard, unknown_settings


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[1]", b'{"conf": "x"}', b'{"dag_run_id": "r"}', b'{"conf": {"project": "p"}}'],
)
def test_a_body_without_an_unknown_setting_has_no_problem(body):
    assert unknown_settings(body) == []


def test_each_unknown_key_is_named_with_the_closest_setting():
    body = json.dumps({"conf": {"num_batchs": 3, "project": "p", "colour": "red"}}).encode()
    assert unknown_settings(body) == [
        "num_batchs: unknown setting (did you mean num_batches?)",
        "colour: unknown setting (known: see docs/settings.md)",
    ]


class RecordingApp:
    """The api-server's app: the body it received, read through `receive`."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        self.bodies.append(message.get("body", b""))
        await send({"type": "http.response.start", "status": 200, "headers": []})


def request(*chunks: bytes) -> Any:
    """A client's request body in `chunks`, then a disconnect."""
    messages = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]
    messages.append({"type": "http.disconnect"})

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    return receive


async def guarded(path: str, method: str, *chunks: bytes) -> tuple[RecordingApp, list[dict]]:
    app, sent = RecordingApp(), []

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path}
    await UnknownSettingsGuard(app)(scope, request(*chunks), send)
    return app, sent


async def test_a_trigger_naming_an_unknown_setting_is_answered_400_and_never_reaches_airflow():
    app, sent = await guarded(TRIGGER_PATH, "POST", b'{"conf": {"num', b'_batchs": 3}}')
    assert app.bodies == []
    assert sent[0]["status"] == 400
    detail = json.loads(sent[1]["body"])["detail"]
    assert detail == "Invalid settings: num_batchs: unknown setting (did you mean num_batches?)"
    assert (b"content-length", b"%d" % len(sent[1]["body"])) in sent[0]["headers"]


async def test_a_valid_trigger_reaches_airflow_with_its_whole_body():
    app, sent = await guarded(f"/base{TRIGGER_PATH}", "POST", b'{"conf": ', b'{"project": "p"}}')
    assert app.bodies == [b'{"conf": {"project": "p"}}'] and sent[0]["status"] == 200


@pytest.mark.parametrize(
    ("path", "method"), [(TRIGGER_PATH, "GET"), ("/api/v2/dags/other/dagRuns", "POST")]
)
async def test_other_requests_pass_on_unread(path, method):
    app, sent = await guarded(path, method, b'{"conf": {"num_batchs": 3}}')
    assert app.bodies == [b'{"conf": {"num_batchs": 3}}'] and sent[0]["status"] == 200
