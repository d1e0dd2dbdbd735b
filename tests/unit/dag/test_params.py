"""The run DAG's Params: the form's cost estimate of the defaults is generated data."""

from __future__ import annotations

from tpu_rl.dag.params import ESTIMATE_FILE, ESTIMATE_LINK, dag_params, defaults_estimate


def test_the_estimate_file_is_current():
    """`make params` writes it; the defaults or the price table changed without it if not."""
    assert ESTIMATE_FILE.read_text() == defaults_estimate() + "\n"


def test_the_capacity_field_shows_the_estimate_file_then_the_link_to_the_estimate_page():
    text = dag_params()["capacity"].schema["description_md"]
    assert text.endswith(f"{ESTIMATE_FILE.read_text().strip()}\n\n{ESTIMATE_LINK}")
    assert "](/tpu-rl/estimate)" in ESTIMATE_LINK
