"""Per-task wiring of the DAG: time limits, docs, console links and callbacks."""
