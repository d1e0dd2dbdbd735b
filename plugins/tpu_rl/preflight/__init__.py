"""Read-only checks of a run against the real project before anything is spent (`make preflight`
and the DAG's `preflight` task): one module per concern, each check a CheckResult."""
