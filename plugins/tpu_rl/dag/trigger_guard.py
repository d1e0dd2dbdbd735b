"""Refuse a trigger of the run DAG whose conf names an unknown setting, before the run exists.

Airflow validates each Param's value at the trigger (create_dagrun), but a conf key that is no
Param becomes one with no schema (airflow/serialization/definitions/param.py:165-166,
SerializedParamsDict.deep_merge), so a typo such as `num_batchs` made a run that `validate`
failed seconds later. This ASGI middleware, one of the plugin's `fastapi_root_middlewares`
(airflow/api_fastapi/app.py:255-270), answers such a trigger with a 400 naming each unknown key
and the closest setting, as the API answers a Param's invalid value; the form shows it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from tpu_rl.names import DAG_ID
from tpu_rl.settings.params import specs

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
TRIGGER_PATH = f"/api/v2/dags/{DAG_ID}/dagRuns"  # POST: trigger_dag_run


def unknown_settings(body: bytes) -> list[str]:
    """The problems of a trigger's body: one per conf key that names no setting (a body that is
    not a JSON object with an object `conf` is left to Airflow's own checks)."""
    try:
        conf = json.loads(body).get("conf")
    except (ValueError, AttributeError, RecursionError):
        return []
    if not isinstance(conf, dict):
        return []
    from tpu_rl.settings.run_settings import unknown_key

    return [unknown_key(key) for key in conf if key not in specs()]


class UnknownSettingsGuard:
    """The api-server's app, with a trigger of the run DAG naming an unknown setting refused."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass every request on; a trigger's whole body is read first, and passed on unless its
        conf names an unknown setting."""
        path = scope.get("path", "")
        if scope["type"] != "http" or scope["method"] != "POST" or not path.endswith(TRIGGER_PATH):
            await self.app(scope, receive, send)
            return
        body, message = b"", await receive()
        while message["type"] == "http.request":
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
            message = await receive()
        else:  # the client went away
            await self.app(scope, receive, send)
            return
        if problems := unknown_settings(body):
            detail = json.dumps({"detail": "Invalid settings: " + "; ".join(problems)}).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(detail)),
            ]
            await send({"type": "http.response.start", "status": 400, "headers": headers})
            await send({"type": "http.response.body", "body": detail})
            return
        replayed = False

        async def replay() -> Message:
            """The body read, once; then the client's own messages (a disconnect)."""
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)
