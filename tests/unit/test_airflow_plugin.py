"""tpu_rl.airflow_plugin: what the plugin hands Airflow: the RL page's app and its navigation
link, the trigger guard, and one of each console link."""

from __future__ import annotations

from tpu_rl.airflow_plugin import TpuRlPlugin
from tpu_rl.dag.links import LINK_CLASSES
from tpu_rl.dag.trigger_guard import UnknownSettingsGuard
from tpu_rl.names import UI_PREFIX
from tpu_rl.ui.app import app


def test_the_rl_page_is_served_under_the_prefix_its_navigation_link_opens():
    [served] = TpuRlPlugin.fastapi_apps
    [view] = TpuRlPlugin.external_views
    assert served["app"] is app and served["url_prefix"] == UI_PREFIX
    assert view["href"] == f"{UI_PREFIX}/" and view["destination"] == "nav"


def test_the_api_server_runs_the_trigger_guard_and_the_tasks_get_every_link_once():
    [middleware] = TpuRlPlugin.fastapi_root_middlewares
    assert middleware["middleware"] is UnknownSettingsGuard
    assert [type(link) for link in TpuRlPlugin.operator_extra_links] == list(LINK_CLASSES)
