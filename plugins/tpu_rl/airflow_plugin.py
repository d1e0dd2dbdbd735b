"""Airflow plugin: the "RL post-training" page (FastAPI app + a link in the UI's navigation),
the tasks' console links, and the api-server's refusal of a trigger naming an unknown setting."""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from tpu_rl.dag.links import LINK_CLASSES
from tpu_rl.dag.trigger_guard import UnknownSettingsGuard
from tpu_rl.names import UI_PREFIX
from tpu_rl.report.run_note import RL_PAGE_ROUTE

PAGE_NAME = "RL post-training"


class PageAppWhenServed:
    """`fastapi_apps`, importing the page's app when Airflow reads it: only the api-server
    serves it (airflow/plugins_manager.py get_fastapi_plugins; get_plugin_info for `airflow
    plugins`), while the scheduler, triggerer, DAG processor and task processes load this plugin
    too, where tpu_rl.ui.app's FastAPI imports cost about a CPU-second each."""

    def __get__(self, plugin: object, owner: type | None = None) -> list[dict[str, Any]]:
        from tpu_rl.ui.app import app

        return [{"app": app, "url_prefix": UI_PREFIX, "name": PAGE_NAME}]


class TpuRlPlugin(AirflowPlugin):
    name = "tpu_rl"
    fastapi_apps = PageAppWhenServed()
    external_views = [
        {
            "name": PAGE_NAME,
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
