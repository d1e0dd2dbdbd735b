"""`make bench`: the project's performance figures, each measured beside a naive baseline."""

# Airflow reads its configuration at import: set the sandbox's environment before any bench
# module imports it.
from sandbox.airflow_env import AIRFLOW_ENV  # noqa: F401
