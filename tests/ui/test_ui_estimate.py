"""The estimate page's API: a run's settings as the trigger form's
Configuration JSON holds them -> every problem at once and the short table the form shows for
its defaults, computed for these settings."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from tests.ui.pages import REQUIRED as TRIGGER_FORM_REQUIRED
from tpu_rl.dag.params import ESTIMATE_FILE
from tpu_rl.settings.params import specs

# What the form's Configuration JSON holds once its required fields are filled: every Param,
# the others at their defaults (tests/ui/test_trigger_form.py reads such a conf back).
REQUIRED = {**TRIGGER_FORM_REQUIRED, "reservation": "my-reservation"}


def form_conf(**changes: object) -> dict:
    return {**{name: spec["default"] for name, spec in specs().items()}, **REQUIRED, **changes}


@pytest.fixture
def client(auth_token) -> TestClient:
    """Without the UI's session cookie: test_needs_an_authenticated_user."""
    from tpu_rl.ui.app import app

    return TestClient(app)


def post(client: TestClient, token: str, body: object) -> dict:
    """The body as the page sends it: the textarea's text."""
    text = body if isinstance(body, str) else json.dumps(body)
    client.cookies.set("_token", token)
    response = client.post("/api/estimate", content=text)
    assert response.status_code == 200, response.text
    return response.json()


def markdown_rows(estimate: dict) -> list[str]:
    return [f"| {' | '.join(row)} |" for row in estimate["rows"]]


def test_needs_an_authenticated_user(client):
    assert client.post("/api/estimate", content="{}").status_code == 401
    client.cookies.set("_token", "not-a-jwt")
    assert client.post("/api/estimate", content="{}").status_code == 403


def test_the_page_and_its_script_are_served_and_the_rl_page_links_to_it(client):
    page = client.get("/estimate")
    assert page.status_code == 200 and "Configuration JSON" in page.text
    assert 'src="estimate.js"' in page.text
    assert "api/estimate" in client.get("/estimate.js").text
    # the RL page (/tpu-rl/, in Airflow's frame) opens it in a new tab
    assert '<a id="estimate-link" href="estimate" target="_blank"' in client.get("/").text


def test_the_forms_defaults_get_the_forms_own_table(client, auth_token):
    """The same table, row for row, as the form shows under the capacity field."""
    answer = post(client, auth_token, form_conf())
    assert answer["errors"] == [] and answer["withheld_by"] == []
    estimate = answer["estimate"]
    assert estimate["columns"] == ["capacity", "TPUs billed", "chip-hours", "cost"]
    shown = ESTIMATE_FILE.read_text()
    assert f"({estimate['summary']})" in shown and estimate["note"] in shown
    table = [line for line in shown.splitlines() if line.startswith("| ")][1:]
    assert markdown_rows(estimate) == table


def test_the_settings_as_filled_in(client, auth_token):
    """200 steps on a Spot slice (one: MaxText 0.2.4 meshes no trainer and sampler slices,
    cell_rules): 32 chips; create 30 + convert 30 + start_backend 5 + train 200 + export 20 +
    destroy 10 = 295 min billed; 32 x 295 / 60 = 157.3 chip-hours at us-east5's Spot $1.35
    (tpu_rl/prices.py: the highest of its snapshots) = $212.40."""
    conf = form_conf(num_batches=200, capacity="spot", reservation="")
    answer = post(client, auth_token, conf)
    assert answer["errors"] == []
    estimate = answer["estimate"]
    assert estimate["summary"] == "1 x v6e-32, 32 chips in all; 200 steps; us-east5; about 4.9 h"
    rows = {row[0]: row for row in estimate["rows"]}
    assert rows["spot"] == ["spot", "4.9 h", "157.3", "$212.40"]
    assert list(rows) == ["reservation", "calendar", "flex_start", "spot"]
    assert "+5.3 chip-hours" in estimate["note"]  # 10 more steps on 32 chips


def test_every_problem_at_once_and_no_figures_from_an_invalid_one(client, auth_token):
    conf = form_conf(
        project="",
        learning_rate=-0.1,
        num_batches="many",
        topology="4x4",
        learnin_rate=1e-6,
        hf_conn_id="hf",
    )
    answer = post(client, auth_token, conf)
    errors = answer["errors"]
    assert errors[:3] == [
        "learnin_rate: unknown setting (did you mean learning_rate?)",
        "hf_conn_id: set by the deployer (TPU_RL_HF_CONN_ID), not by a run",
        "num_batches: must be an integer, got 'many'",
    ]
    assert "project: required, and empty" in errors
    assert "learning_rate: must be in (0, 1), got -0.1" in errors
    assert any(e.startswith("topology: 4x4 (16 chips) is a v6e-16, not a v6e-32") for e in errors)
    assert len(errors) == 6, errors
    assert answer["estimate"] is None and answer["withheld_by"] == ["num_batches", "topology"]


def test_problems_of_other_settings_keep_the_estimate(client, auth_token):
    """A form not filled in yet (no project, no zone) still shows its figures, at the
    tutorial's region (named in the summary)."""
    answer = post(client, auth_token, form_conf(project="", region="", zone="", num_batches=20))
    assert answer["errors"][:3] == [
        "project: required, and empty",
        "region: required, and empty",
        "zone: required, and empty",
    ]
    assert answer["withheld_by"] == []
    assert answer["estimate"]["summary"].endswith("; 20 steps; us-east5; about 1.9 h")


def test_the_spend_limit_is_checked_as_validate_checks_it(client, auth_token):
    conf = form_conf(capacity="spot", reservation="", max_spend_usd=50.0)
    answer = post(client, auth_token, conf)
    [problem] = answer["errors"]
    assert problem.startswith("max_spend_usd: the run's estimate is $104.40, over the limit")
    assert answer["estimate"] is not None


def test_valid_settings_get_their_warnings(client, auth_token):
    answer = post(client, auth_token, form_conf(num_batches=1))
    assert answer["errors"] == [] and answer["warnings"]
    assert any("resume" in warning for warning in answer["warnings"]), answer["warnings"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "not valid JSON (Expecting property name enclosed in double quotes"),
        ("[1, 2]", "the settings must be a JSON object"),
        ("", "not valid JSON (Expecting value"),
    ],
)
def test_text_that_is_no_settings_object_says_so(client, auth_token, text, problem):
    answer = post(client, auth_token, text)
    assert answer["errors"][0].startswith(problem) and len(answer["errors"]) == 1
    assert answer["estimate"] is None


# -- any body gets its problems, deeply nested JSON too -------------------------------------------

DEEP = 100_000


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("[" * DEEP + "]" * DEEP, "not valid settings: JSON nested more than 16 levels deep"),
        (
            json.dumps(form_conf())[:-1] + ', "extra_train_args": ' + "[" * 500 + "]" * 500 + "}",
            "extra_train_args: nested more than 16 levels deep",
        ),
        (
            json.dumps(form_conf())[:-1]
            + ', "vllm_hf_overrides": '
            + '{"a": ' * 500
            + "1"
            + "}" * 501,
            "vllm_hf_overrides: nested more than 16 levels deep",
        ),
        (
            json.dumps(form_conf(vllm_hf_overrides="[" * 2040 + "]" * 2040)),
            "not valid settings: a setting's JSON text nests too deeply to read",
        ),
    ],
    ids=["body", "list", "object", "json-text"],
)
def test_deeply_nested_json_gets_its_problem_not_a_server_error(client, auth_token, body, problem):
    answer = post(client, auth_token, body)
    assert answer["errors"] == [problem] and answer["estimate"] is None


def test_a_setting_nested_within_the_limit_gets_validates_own_message(client, auth_token):
    answer = post(client, auth_token, form_conf(extra_train_args=[[[["a"]]]]))
    assert answer["errors"] == ["extra_train_args: must be a list of strings, got [[[['a']]]]"]
