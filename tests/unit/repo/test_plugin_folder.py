"""Airflow's plugin loader runs every file under plugins/ as a module of its own, in every task
process and in the api-server, unless the folder's .airflowignore leaves it out: plugins/
.airflowignore leaves it airflow_plugin.py alone. A folder copied without that file still loads
every module a second time, and each must survive it, or every task log and the UI's plugin
import errors show a failure.

It names each such module by its file's stem alone and puts it in sys.modules under that name
(airflow/_shared/plugins_manager/plugins_manager.py lines 246-255 in Airflow 3.3.2;
airflow/plugins_manager.py lines 284-290 in 3.1.8). A file named as a module Python or an installed
package has replaces that module in every process that loaded the folder: with
tpu_rl/preflight/calendar.py, `import calendar` anywhere after the plugins loaded gave our module,
without the standard library's timegm or monthrange."""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
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


STEMS = ["airflow_plugin", "storage", "registry", "job_trigger"]  # tpu_rl modules' file stems
LOAD = """
import json, sys
from airflow import plugins_manager
plugins, errors = plugins_manager._get_plugins()
print(json.dumps({
    "plugins": [p.name for p in plugins],
    "errors": errors,
    "executed": [stem for stem in sys.argv[1:] if stem in sys.modules],
}))
"""


def test_the_folders_airflowignore_leaves_airflow_the_plugin_module_alone():
    """In a process of its own: sys.modules there holds what the loader executed."""
    env = {**os.environ, "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins")}
    done = subprocess.run(
        [sys.executable, "-c", LOAD, *STEMS], env=env, capture_output=True, text=True, check=True
    )
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded["plugins"].count("tpu_rl") == 1 and loaded["errors"] == {}
    assert loaded["executed"] == ["airflow_plugin"]
