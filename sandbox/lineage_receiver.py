"""An OpenLineage backend on loopback: what the provider's HTTP transport posts, kept in order.

It answers as Marquez does the endpoint the transport posts to (`POST /api/v1/lineage`, 201
Created; Marquez's OpenLineageResource.create; the transport's default endpoint is
`api/v1/lineage`, openlineage-python 1.54.0 client/transport/http.py HttpConfig.endpoint), and
refuses a body that is not a JSON object with 400, as Marquez's validation does: the sender
must be the real client, with its real serialisation.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sandbox.loopback import send_json, serve_on_loopback

ENDPOINT = "/api/v1/lineage"


class LineageReceiver:
    """The events posted to it, in the order they came."""

    def __init__(self) -> None:
        self._events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.url = ""

    def events(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._events)

    def keep(self, event: dict[str, Any]) -> None:
        with self._lock:
            self._events.append(event)

    def transport(self) -> dict[str, Any]:
        """The provider's `[openlineage] transport` that posts here (conf.py transport)."""
        return {"type": "http", "url": self.url, "endpoint": ENDPOINT.lstrip("/")}


def _handler(receiver: LineageReceiver) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path.split("?")[0] != ENDPOINT:
                send_json(self, 404, {"code": 404, "message": "HTTP 404 Not Found"})
                return
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                event = json.loads(body)
            except ValueError:
                event = None
            if not isinstance(event, dict):
                send_json(self, 400, {"code": 400, "message": "Unable to process JSON"})
                return
            receiver.keep(event)
            send_json(self, 201, {})

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the test reads the events, not the access log."""

    return Handler


@contextmanager
def lineage_receiver() -> Iterator[LineageReceiver]:
    """A receiver serving on loopback until the block ends."""
    receiver = LineageReceiver()
    httpd, receiver.url = serve_on_loopback(_handler(receiver))
    try:
        yield receiver
    finally:
        httpd.shutdown()
        httpd.server_close()
