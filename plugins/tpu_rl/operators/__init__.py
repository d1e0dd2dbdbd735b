"""The DAG's operators."""

from typing import Any

from airflow.sdk import BaseOperator

# Airflow caches the fields it serializes per operator class, and builds a throwaway
# BaseOperator to find them for every class that has none, on every parse of a DAG file: the
# same fields for every class. Found once for BaseOperator, our classes inherit them.
BaseOperator.get_serialized_fields()

# The run's cluster, from its Params, as the GKE operators' fields (rendered when a task runs).
RUN_CLUSTER = {
    "project_id": "{{ params.project }}",
    "location": "{{ params.region }}",
    "cluster_name": "{{ params.cluster_name }}",
}


def on_run_cluster(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A GKE operator's arguments, by default on the run's cluster."""
    return {**RUN_CLUSTER, **kwargs}
