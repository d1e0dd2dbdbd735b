"""The run DAG's Params: the form's cost estimate of the defaults is generated data."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlparse

from tpu_rl.dag.params import ESTIMATE_FILE, dag_params, defaults_estimate, estimate_link
from tpu_rl.settings.params import default_settings


def test_the_estimate_file_is_current():
    """`make params` writes it; the defaults or the price table changed without it if not."""
    assert ESTIMATE_FILE.read_text() == defaults_estimate() + "\n"


def test_the_capacity_field_shows_the_estimate_file_then_the_link_to_the_estimate_page():
    text = dag_params()["capacity"].schema["description_md"]
    assert text.endswith(f"{ESTIMATE_FILE.read_text().strip()}\n\n{estimate_link()}")


def test_the_link_opens_the_estimate_page_with_the_forms_defaults():
    """One click from the form estimates its settings: the page reads them from ?conf=."""
    address = estimate_link().split("](", 1)[1].split(")", 1)[0]
    assert address.startswith("/tpu-rl/estimate?conf=") and " " not in address
    conf = json.loads(parse_qs(urlparse(address).query)["conf"][0])
    assert conf == vars(default_settings())
