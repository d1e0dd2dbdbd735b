"""Read-only checks of a run against the real project before anything is spent (`make preflight`
and the DAG's `preflight` task): one module per concern, each check a CheckResult, every check
declared once in checks.py (run.py runs them; checks_doc.py generates their lists)."""
