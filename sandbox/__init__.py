"""The sandbox: emulators of the Google Cloud and Kubernetes APIs the product calls, refusing what
production refuses, and the harness that runs Airflow's real processes against them on PostgreSQL.

The tests (`tests/`) and the tools (`make demo`, `make demo-ui`, `make bench`) import it; the
product (`plugins/tpu_rl`) never does. Its contract with the product is EMULATOR_API.md.
"""
