"""Airflow's plugin loader runs every file under plugins/ as a module of its own, in every task
process and in the api-server: each of our modules must survive that second run, or every task
log and the UI's plugin import errors show a failure.

It names each such module by its file's stem alone and puts it in sys.modules under that name
(airflow/_shared/plugins_manager/plugins_manager.py lines 246-255 in Airflow 3.3.2;
airflow/plugins_manager.py lines 284-290 in 3.1.8). A file named as a module Python or an installed
package has replaces that module in every process that loaded the folder: with
tpu_rl/preflight/calendar.py, `import calendar` anywhere after the plugins loaded gave our module,
without the standard library's timegm or monthrange."""

from __future__ import annotations

import pkgutil
import sys

from airflow import plugins_manager

from sandbox.paths import REPO


def test_airflow_loads_the_plugins_folder_without_import_errors():
    plugins_manager._get_plugins.cache_clear()
    plugins, import_errors = plugins_manager._get_plugins()
    assert import_errors == {}
    assert "tpu_rl" in {plugin.name for plugin in plugins}


def test_no_file_under_plugins_is_named_as_a_module_python_or_a_package_has():
    stems = {path.stem for path in (REPO / "plugins").rglob("*.py")} - {"__init__"}
    installed = {module.name for module in pkgutil.iter_modules()}
    assert sorted(stems & (set(sys.stdlib_module_names) | installed)) == []
