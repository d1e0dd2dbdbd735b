"""The "RL post-training" page in Airflow's UI: a FastAPI app the api-server mounts."""
