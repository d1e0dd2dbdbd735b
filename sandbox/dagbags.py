"""Airflow's DagBag, BundleDagBag and sync_bag_to_db from the module the installed Airflow keeps
them in, so that the tests and tools run on every supported Airflow (README "Supported versions").

Airflow 3.3 defines them in airflow/dag_processing/dagbag.py (its airflow/models/dagbag.py
re-exports DagBag with a DeprecatedImportWarning, `__getattr__`); Airflow 3.1 defines them in
airflow/models/dagbag.py and has no airflow.dag_processing.dagbag.
"""

from __future__ import annotations

import inspect
from typing import Any

try:
    from airflow.dag_processing.dagbag import BundleDagBag, DagBag, sync_bag_to_db
except ModuleNotFoundError:
    from airflow.models.dagbag import BundleDagBag, DagBag, sync_bag_to_db

__all__ = ["BundleDagBag", "DagBag", "bundle_dag_bag", "sync_bag_to_db"]


def bundle_dag_bag(dag_folder: Any, bundle: Any) -> BundleDagBag:
    """The DAGs of `dag_folder` as the DAG processor parses them from `bundle`: Airflow 3.3's
    DagBag takes the bundle's name (`bundle_name`), Airflow 3.1's has no such parameter."""
    named = "bundle_name" in inspect.signature(DagBag.__init__).parameters
    extra = {"bundle_name": bundle.name} if named else {}
    return BundleDagBag(dag_folder=str(dag_folder), bundle_path=bundle.path, **extra)
