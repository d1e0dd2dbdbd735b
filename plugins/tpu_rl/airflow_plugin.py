"""Airflow plugin: the "RL post-training" page (FastAPI app + a link in the UI's navigation),
the tasks' console links, and the api-server's refusal of a trigger naming an unknown setting."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from tpu_rl.dag.links import LINK_CLASSES
from tpu_rl.dag.trigger_guard import UnknownSettingsGuard
from tpu_rl.names import UI_PREFIX
from tpu_rl.report.run_note import RL_PAGE_ROUTE
from tpu_rl.ui.app import app


class TpuRlPlugin(AirflowPlugin):
    name = "tpu_rl"
    fastapi_apps = [{"app": app, "url_prefix": UI_PREFIX, "name": "RL post-training"}]
    external_views = [
        {
            "name": "RL post-training",
            "href": f"{UI_PREFIX}/",
            "destination": "nav",
            "category": "browse",
            "url_route": RL_PAGE_ROUTE,
        }
    ]
    fastapi_root_middlewares = [
        {"middleware": UnknownSettingsGuard, "name": "tpu_rl unknown settings"}
    ]
    operator_extra_links = [link() for link in LINK_CLASSES]
