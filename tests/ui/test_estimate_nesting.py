"""The estimate API answers any body with its problems, deeply nested JSON too (issue 60, 6b)."""

from __future__ import annotations

import json

import pytest

from tests.ui.test_ui_estimate import client, form_conf, post  # noqa: F401 (the fixture)

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
def test_deeply_nested_json_gets_its_problem_not_a_server_error(client, auth_token, body, problem):  # noqa: F811
    answer = post(client, auth_token, body)
    assert answer["errors"] == [problem] and answer["estimate"] is None


def test_a_setting_nested_within_the_limit_gets_validates_own_message(client, auth_token):  # noqa: F811
    answer = post(client, auth_token, form_conf(extra_train_args=[[[["a"]]]]))
    assert answer["errors"] == ["extra_train_args: must be a list of strings, got [[[['a']]]]"]
