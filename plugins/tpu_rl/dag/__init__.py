"""Per-task wiring of the DAG: time limits, docs, console links, callbacks and its Params."""
