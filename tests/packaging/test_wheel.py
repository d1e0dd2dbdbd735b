"""The wheel `make dist` builds holds all of tpu_rl: installed alone, with plugins/ off sys.path,
the DAG files' operators, the triggers the tasks defer to and the UI plugin all resolve from it."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import AIRFLOW_ENV, REPO
from tests.packaging.install import install_wheel, session_wheel

PACKAGE = REPO / "plugins" / "tpu_rl"
DAG_FILES = [REPO / "dags" / "tpu_rl_post_training.py", REPO / "dags" / "tpu_rl_janitor.py"]
DISTRIBUTION = "tpu-rl-airflow"

IMPORT_THE_DAGS_NAMES = """
import json, runpy, sys
from airflow.sdk import BaseOperator
names = {}
for statement in json.loads(sys.argv[1]):
    exec(statement, names)
operators = {k: v.__module__ for k, v in names.items()
             if isinstance(v, type) and issubclass(v, BaseOperator)}
for dag_file in json.loads(sys.argv[2]):
    runpy.run_path(dag_file)  # reads the Params' file, the docs: the package's data
import tpu_rl
print(json.dumps({"package": tpu_rl.__file__, "operators": operators}))
"""
SERIALIZED_TRIGGER_CLASSPATHS = """
import importlib, inspect, json, pkgutil, tpu_rl
from unittest import mock
from airflow.triggers.base import BaseTrigger

def serialized_classpath(cls):
    # the trigger's own serialize() on an instance whose attributes are stand-ins
    with mock.patch.object(cls, "__getattr__", lambda self, name: mock.MagicMock(), create=True):
        return cls.__new__(cls).serialize()[0]

classes = set()
for module in pkgutil.walk_packages(tpu_rl.__path__, "tpu_rl."):
    for value in vars(importlib.import_module(module.name)).values():
        if isinstance(value, type) and issubclass(value, BaseTrigger):
            if value.__module__.startswith("tpu_rl.") and not inspect.isabstract(value):
                classes.add(value)
print(json.dumps(sorted({serialized_classpath(cls) for cls in classes})))
"""
IMPORT_BY_CLASSPATH = """
import json, sys
from airflow.sdk.module_loading import import_string
from airflow.triggers.base import BaseTrigger
found = {}
for classpath in json.loads(sys.argv[1]):
    cls = import_string(classpath)  # what the triggerer does with a stored trigger
    assert issubclass(cls, BaseTrigger), classpath
    found[classpath] = sys.modules[cls.__module__].__file__
print(json.dumps(found))
"""
LOADED_PLUGINS = """
import json
from importlib.metadata import entry_points
from airflow import plugins_manager
points = {ep.name: ep.value for ep in entry_points(group="airflow.plugins")
          if ep.dist.name == "tpu-rl-airflow"}
plugins_manager.ensure_plugins_loaded()
names = [info["name"] for info in plugins_manager.get_plugin_info()]
print(json.dumps({"entry_points": points, "plugins": names,
                  "import_errors": plugins_manager.get_import_errors()}))
"""


# one worker runs the module: its wheel and install are made once
pytestmark = pytest.mark.xdist_group("packaging")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built as `make dist` builds it, from a copy of the sources (no build/ left),
    once per session (session_wheel)."""
    return session_wheel(REPO, tmp_path_factory)


@pytest.fixture(scope="module")
def site(wheel, tmp_path_factory) -> Path:
    """An empty folder the wheel alone was installed into."""
    return install_wheel(wheel, tmp_path_factory.mktemp("site"))


def run_installed(site: Path, code: str, *args: str, plugins_folder: Path) -> object:
    """JSON printed by `code` in a fresh interpreter whose only addition to sys.path is `site`."""
    env = {
        **os.environ,
        **AIRFLOW_ENV,
        "PYTHONPATH": str(site),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(plugins_folder),
    }
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        cwd=site.parent,  # not the repository: its plugins/ must not be found from the cwd
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def tpu_rl_imports_of_the_dags() -> list[str]:
    """Each `from tpu_rl... import ...` statement of the DAG files, as written there."""
    statements = []
    for dag_file in DAG_FILES:
        for node in ast.walk(ast.parse(dag_file.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tpu_rl"):
                statements.append(ast.unparse(node))
    return statements


def test_the_wheel_holds_every_file_of_the_package(wheel):
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    sources = {
        path.relative_to(REPO / "plugins").as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }
    assert any(not name.endswith(".py") for name in sources)  # data files are among them
    assert sorted(sources - in_wheel) == []


def test_the_wheel_requires_at_least_the_oldest_supported_pins(wheel):
    metadata = zipfile.ZipFile(wheel).read(f"{wheel.name.split('-py3')[0]}.dist-info/METADATA")
    required = {
        line.split(": ", 1)[1].split("<")[0].split(">")[0].lower(): line
        for line in metadata.decode().splitlines()
        if line.startswith("Requires-Dist: ")
    }
    runtime = ["apache-airflow", "apache-airflow-providers-", "pyyaml", "jsonschema"]
    # the oldest supported pins (README: Supported versions): the wheel admits them and up
    for line in (REPO / "requirements-compat.txt").read_text().splitlines():
        name, _, version = line.partition("==")
        if version and name.lower().startswith(tuple(runtime)):
            assert f">={version}" in required[name.lower()], name


def test_the_dags_operators_and_data_files_come_from_the_wheel(site, tmp_path):
    statements = tpu_rl_imports_of_the_dags()
    dag_files = [str(path) for path in DAG_FILES]
    loaded = run_installed(
        site,
        IMPORT_THE_DAGS_NAMES,
        json.dumps(statements),
        json.dumps(dag_files),
        plugins_folder=tmp_path,
    )
    assert Path(loaded["package"]).is_relative_to(site)
    assert loaded["operators"], statements  # the DAGs' operator classes were among the names
    assert all(module.startswith("tpu_rl.") for module in loaded["operators"].values())


def test_the_triggers_import_from_the_wheel_by_their_serialized_classpath(site, tmp_path):
    classpaths = run_installed(site, SERIALIZED_TRIGGER_CLASSPATHS, plugins_folder=tmp_path)
    assert classpaths and all(path.startswith("tpu_rl.") for path in classpaths)
    found = run_installed(
        site, IMPORT_BY_CLASSPATH, json.dumps(classpaths), plugins_folder=tmp_path
    )
    assert sorted(found) == classpaths
    assert all(Path(file).is_relative_to(site) for file in found.values())


def test_the_entry_point_registers_the_ui_plugin(site, tmp_path):
    loaded = run_installed(site, LOADED_PLUGINS, plugins_folder=tmp_path)
    assert loaded["entry_points"] == {"tpu_rl": "tpu_rl.airflow_plugin:TpuRlPlugin"}
    assert loaded["plugins"].count("tpu_rl") == 1
    assert loaded["import_errors"] == {}


def test_the_plugin_registers_once_from_the_folder_and_the_entry_point(site):
    loaded = run_installed(site, LOADED_PLUGINS, plugins_folder=REPO / "plugins")
    assert loaded["plugins"].count("tpu_rl") == 1
    # Airflow skips a second plugin of the same name and lists the skip as an import error
    skipped = "Plugin 'tpu_rl' already registered, skipping"
    assert list(loaded["import_errors"].values()) == [skipped]
