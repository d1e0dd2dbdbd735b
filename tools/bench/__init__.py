"""`make bench`: the project's performance figures, each measured beside a naive baseline."""

# Airflow reads its configuration at import: set the tests' environment before any bench
# module imports it.
from tests.conftest import AIRFLOW_ENV  # noqa: F401
