"""Airflow plugin: the "RL post-training" page (FastAPI app + a link in the UI's navigation)."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from tpu_rl.ui.app import app

URL_PREFIX = "/tpu-rl"


class TpuRlPlugin(AirflowPlugin):
    name = "tpu_rl"
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "RL post-training"}]
    external_views = [
        {
            "name": "RL post-training",
            "href": f"{URL_PREFIX}/",
            "destination": "nav",
            "category": "browse",
            "url_route": "rl-post-training",
        }
    ]
