"""The run's settings: their declaration, the typed object, validation and the DAG's Params."""
