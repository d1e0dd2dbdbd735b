"""A fake's HTTP server on 127.0.0.1, on a free port, served by a daemon thread."""

from __future__ import annotations

import http.server
import threading


def serve_on_loopback(
    handler: type[http.server.BaseHTTPRequestHandler],
) -> tuple[http.server.ThreadingHTTPServer, str]:
    """The started server and its base URL (http://127.0.0.1:<port>); `shutdown()` ends it."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"
