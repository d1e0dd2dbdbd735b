"""The DAG's operators."""

from airflow.sdk import BaseOperator

# Airflow caches the fields it serializes per operator class, and builds a throwaway
# BaseOperator to find them for every class that has none, on every parse of a DAG file: the
# same fields for every class. Found once for BaseOperator, our ~15 classes inherit them.
BaseOperator.get_serialized_fields()
