"""A fake's HTTP server on 127.0.0.1, on a free port, served by a daemon thread."""

from __future__ import annotations

import http.server
import json
import threading
from typing import Any


def serve_on_loopback(
    handler: type[http.server.BaseHTTPRequestHandler],
) -> tuple[http.server.ThreadingHTTPServer, str]:
    """The started server and its base URL (http://127.0.0.1:<port>); `shutdown()` ends it."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


def send_json(handler: http.server.BaseHTTPRequestHandler, status: int, payload: Any) -> None:
    """Answer the handler's request with `payload` as JSON and its length."""
    data = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
