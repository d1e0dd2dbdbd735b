"""Airflow's plugin loader runs every file under plugins/ as a module of its own, in every task
process and in the api-server: each of our modules must survive that second run, or every task
log and the UI's plugin import errors show a failure."""

from __future__ import annotations

from airflow import plugins_manager


def test_airflow_loads_the_plugins_folder_without_import_errors():
    plugins_manager._get_plugins.cache_clear()
    plugins, import_errors = plugins_manager._get_plugins()
    assert import_errors == {}
    assert "tpu_rl" in {plugin.name for plugin in plugins}
