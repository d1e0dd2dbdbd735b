"""Bounds on every free-text setting: a length limit and a character class, refused by the
Param's JSON schema (the trigger form, Airflow's Param check) and by validate (a conf from the
API or a file), with a message naming the setting and not repeating the value."""

from __future__ import annotations

import pytest
from airflow.sdk import Param
from airflow.sdk.exceptions import ParamValidationError

from tests.support.settings import errors_for
from tpu_rl.settings.params import specs

# Every string setting that is not a choice, as the declaration had them before the limits.
FREE_TEXT = [
    "project",
    "region",
    "zone",
    "cluster_name",
    "gcs_bucket",
    "reservation",
    "capacity_ladder",
    "authorized_cidr",
    "cluster_toolkit_version",
    "compute_type",
    "tpu_type",
    "topology",
    "namespace",
    "kueue_queue",
    "client_service_account",
    "model_name",
    "hf_model_path",
    "hf_revision",
    "tokenizer_path",
    "cloud_image_name",
    "pathways_server_image",
    "pathways_proxy_server_image",
    "data_template_path",
    "chat_template_path",
    "vllm_hf_overrides",
]
MIB = 1024 * 1024
GARBAGE = {
    "10 MiB": "a" * (10 * MIB),
    "NUL": "ab\x00cd",
    "ANSI escape": "ab\x1b[31mred\x1b[0m",
    "right-to-left override": "ab\u202ecd",
    "right-to-left isolate": "ab\u2067cd",
    "trailing newline": "abcd\n",
}


def refused_by_schema(name: str, value: object) -> bool:
    try:
        Param(**specs()[name]).resolve(value)
    except ParamValidationError:
        return True
    return False


def test_every_free_text_setting_declares_a_length_limit_and_a_pattern():
    string_settings = {
        name for name, spec in specs().items() if "string" in spec["type"] and "enum" not in spec
    }
    assert string_settings == set(FREE_TEXT)
    for name in FREE_TEXT:
        assert specs()[name]["maxLength"] <= 4096 and specs()[name]["pattern"], name
    items = specs()["extra_train_args"]
    assert items["maxItems"] and items["items"]["maxLength"] and items["items"]["pattern"]


@pytest.mark.parametrize("kind", list(GARBAGE))
@pytest.mark.parametrize("name", FREE_TEXT)
def test_garbage_is_refused_naming_the_setting(tutorial_conf, name, kind):
    value = GARBAGE[kind]
    errors = errors_for(tutorial_conf, **{name: value})
    assert errors and all(e.startswith(f"{name}: ") for e in errors), errors
    assert sum(map(len, errors)) < 1000  # the value is not repeated
    assert not any(c in "".join(errors) for c in "\x00\x1b\u202e\u2067")
    assert refused_by_schema(name, value)


@pytest.mark.parametrize("kind", list(GARBAGE))
def test_garbage_in_an_extra_train_flag_is_refused(tutorial_conf, kind):
    flags = ["rl.loss_algo=grpo", f"remat_policy_note={GARBAGE[kind]}"]
    errors = errors_for(tutorial_conf, extra_train_args=flags)
    assert errors and all(e.startswith("extra_train_args[1]: ") for e in errors), errors
    assert sum(map(len, errors)) < 1000
    assert refused_by_schema("extra_train_args", flags)


def test_too_many_extra_train_flags_are_refused(tutorial_conf):
    flags = [f"flag_{i}=1" for i in range(10_000)]
    assert errors_for(tutorial_conf, extra_train_args=flags) == [
        "extra_train_args: 10000 items; at most 256"
    ]
    assert refused_by_schema("extra_train_args", flags)


def test_the_message_names_the_character_and_its_position(tutorial_conf):
    [error] = errors_for(tutorial_conf, namespace="team\u202ea")
    assert error.startswith("namespace: has U+202E (RIGHT-TO-LEFT OVERRIDE) at position 5")
    [error] = errors_for(tutorial_conf, data_template_path="a\x1b[2J")
    assert error.startswith("data_template_path: has U+001B (a control character) at position 2")


def test_a_huge_choice_or_unknown_key_is_not_repeated(tutorial_conf):
    errors = errors_for(tutorial_conf, cluster_mode="x" * MIB, **{"y" * MIB: 1})
    assert len(errors) == 2 and sum(map(len, errors)) < 1000, [e[:100] for e in errors]


def test_a_character_outside_the_class_is_told_once_by_the_settings_own_rule(
    tutorial_conf,
):
    # a registry host may not hold a space: the image grammar says so first, once
    errors = errors_for(tutorial_conf, cloud_image_name="us-docker.pkg.dev/a b:1")
    assert len(errors) == 1 and "not an image reference" in errors[0]
    assert refused_by_schema("cloud_image_name", "us-docker.pkg.dev/a b:1")


def test_the_defaults_and_the_tutorial_pass_the_schema(tutorial_conf):
    for name, spec in specs().items():
        Param(**spec).resolve(tutorial_conf.get(name, spec["default"]))
