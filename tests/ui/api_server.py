"""Airflow's api-server app (its own factory, which mounts the plugin) on loopback, in a thread."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from sandbox.cloud import free_port


@contextlib.contextmanager
def api_server() -> Iterator[str]:
    """The app served until the block ends; its base URL."""
    import uvicorn
    from airflow.api_fastapi.app import create_app

    config = uvicorn.Config(
        create_app(apps="core"), host="127.0.0.1", port=free_port(), log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the api-server did not start")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
