"""The trigger forms' Params: a section on every field, null accepted where a field may be empty."""

from __future__ import annotations

import pytest
from airflow.sdk import Param
from airflow.sdk.definitions.param import ParamsDict
from airflow.sdk.exceptions import ParamValidationError

from tests.conftest import REPO
from tpu_rl.dag.params import dag_params
from tpu_rl.janitor.params import JanitorParams, janitor_params
from tpu_rl.settings.metadata import Section
from tpu_rl.settings.run_settings import (
    OPTIONAL_SETTINGS,
    SETTING_FIELDS,
    SettingsError,
    load_settings,
)
from tpu_rl.settings.validation import REQUIRED_SETTINGS


def required_in_form(p: Param) -> bool:
    """The UI's rule: a field is required unless its type admits null."""
    kind = p.schema.get("type")
    return bool(kind) and not (isinstance(kind, list) and "null" in kind)


def form_sections(params: dict[str, Param]) -> list[str]:
    """The sections as Airflow's form lists them: each where its first field is declared."""
    return list(dict.fromkeys(p.schema["section"] for p in params.values()))


def test_every_setting_is_in_its_section_and_the_tutorials_are_in_the_open_one():
    params = dag_params()
    assert list(params) == list(SETTING_FIELDS)
    assert all(p.schema["section"] for p in params.values())
    assert form_sections(params) == [section.value for section in Section]
    # the one section Airflow's form opens (tpu_rl.settings.metadata.Section) comes first and
    # holds what the tutorial has a user change: where, what capacity, which model, how long
    assert Section.ESSENTIALS == "Run Parameters"
    opened = [name for name, p in params.items() if p.schema["section"] == "Run Parameters"]
    assert opened == [
        *REQUIRED_SETTINGS,
        "cluster_mode",
        "capacity",
        "reservation",
        "model_name",
        "hf_model_path",
        "tokenizer_path",
        "num_batches",
    ]
    assert params["project"].schema["section"] == "Run Parameters"
    assert params["kueue_queue"].schema["section"] == "Google Cloud"
    assert params["scan_layers"].schema["section"] == "Model"
    assert params["extra_train_args"].schema["section"] == "GRPO"
    assert params["export_timeout_minutes"].schema["section"] == "Run control"


def test_only_the_settings_that_must_be_filled_carry_the_required_mark():
    """Only the five fields without a default show the red star."""
    params = dag_params()
    marked = [name for name, p in params.items() if required_in_form(p)]
    assert (
        marked
        == list(REQUIRED_SETTINGS)
        == [
            "project",
            "region",
            "zone",
            "cluster_name",
            "gcs_bucket",
        ]
    )


@pytest.mark.parametrize("name", OPTIONAL_SETTINGS)
def test_an_emptied_optional_field_passes_the_form_and_reads_as_empty(name, tutorial_conf):
    ParamsDict(dag_params()).__setitem__(name, None)  # Param validation accepts null
    conf = {**tutorial_conf, "cluster_mode": "existing", name: None}
    settings = load_settings(conf)
    assert getattr(settings, name) in ("", [], {})


@pytest.mark.parametrize("name", ["num_batches", "learning_rate", "keep_cluster", "topology"])
def test_an_emptied_field_with_a_default_passes_the_form_and_reads_as_its_default(
    name, tutorial_conf
):
    ParamsDict(dag_params()).__setitem__(name, None)  # Param validation accepts null
    settings = load_settings({**tutorial_conf, name: None})
    assert getattr(settings, name) == SETTING_FIELDS[name].default


def test_an_emptied_required_field_is_refused_by_the_form_and_by_validate(tutorial_conf):
    params = ParamsDict(dag_params())
    with pytest.raises(Exception, match="None is not of type 'string'"):
        params["project"] = None
    with pytest.raises(SettingsError, match="project: must be a string, got None"):
        load_settings({**tutorial_conf, "project": None})


def test_the_dag_serializes_with_nullable_params():
    from airflow.serialization.serialized_objects import DagSerialization

    from sandbox.dagbags import DagBag

    dag = DagBag(str(REPO / "dags")).dags["tpu_rl_post_training"]
    restored = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    assert restored.params.get_param("kueue_queue").schema["type"] == ["null", "string"]
    assert restored.params.get_param("batch_size").schema["section"] == "GRPO"


def test_janitor_params_have_titles_descriptions_sections():
    params = janitor_params()
    for name, p in params.items():
        assert p.schema["title"] and p.schema["title"] != name, name
        assert p.description and p.schema["section"], name
    assert {name for name, p in params.items() if not required_in_form(p)} == {
        "gcs_bucket",
        "clusters",
        "existing_clusters",
    }


def test_a_janitor_dry_run_needs_no_bucket():
    params = ParamsDict(janitor_params())
    params["project"], params["region"] = "my-project-1", "us-east5"
    params["gcs_bucket"] = None
    params["clusters"] = None
    parsed = JanitorParams.from_params(params.dump())
    assert parsed.gcs_bucket == "" and parsed.clusters == () and parsed.dry_run


def test_the_capacity_settings_in_the_form():
    """A choice among the four modes in the section the form opens; resumes in run control."""
    params = ParamsDict(dag_params())
    capacity = params.get_param("capacity").schema
    assert capacity["enum"] == ["reservation", "calendar", "flex_start", "spot"]
    assert capacity["section"] == "Run Parameters" and params["capacity"] == "reservation"
    with pytest.raises(Exception, match="is not one of"):
        params["capacity"] = "preemptible"
    assert params.get_param("max_training_restarts").schema["section"] == "Run control"
    assert params.get_param("checkpoint_period").schema["section"] == "GRPO"


def test_the_form_gets_no_bounds_to_clamp_and_the_params_refuse_the_value_typed(tutorial_conf):
    """Airflow's form clamps a number to its schema's top-level minimum on blur (0 training
    steps would silently become 1): no top-level minimum/maximum. The bounds sit in allOf,
    which the form does not read and Airflow's trigger checks, so 0 is refused as typed;
    validate names it too."""
    params = ParamsDict(dag_params())
    for name in ("num_batches", "checkpoint_period", "max_training_restarts", "max_spend_usd"):
        schema = params.get_param(name).schema
        assert "minimum" not in schema and "maximum" not in schema, name
    assert params.get_param("num_batches").description.endswith(" From 1 to 10,000,000.")
    with pytest.raises(ParamValidationError, match="0 is less than the minimum of 1"):
        params["num_batches"] = 0
    with pytest.raises(ParamValidationError, match="10000001 is greater than the maximum"):
        params["num_batches"] = 10_000_001
    with pytest.raises(ParamValidationError, match="-1 is less than the minimum of 0"):
        params["max_spend_usd"] = -1
    params["max_spend_usd"], params["num_batches"] = 0, None  # a floor's own value; emptied
    with pytest.raises(SettingsError, match="num_batches: must be at least 1, got 0"):
        load_settings({**tutorial_conf, "num_batches": 0})


def test_model_and_tpu_offer_the_catalogue_and_allow_others():
    """The form suggests the catalogue's models and TPU types as they are typed in
    (`examples`: a datalist), and a type outside the catalogue is still a value it takes."""
    params = ParamsDict(dag_params())
    assert "gemma4-26b" in params.get_param("model_name").schema["examples"]
    assert {"v6e-32", "v5p-8"} <= set(params.get_param("tpu_type").schema["examples"])
    params["tpu_type"], params["model_name"] = "v5p-1024", "my-model"


@pytest.mark.parametrize("params", [dag_params(), janitor_params()], ids=["run", "janitor"])
def test_every_param_is_checked_as_draft_07_and_still_refuses_a_wrong_type(params):
    """Each task start validates every Param; the draft-07 dialect keeps that cheap, and each
    schema must be valid there (jsonschema checks the schema before the value)."""
    from jsonschema import Draft7Validator

    for name, param in params.items():
        assert param.schema["$schema"] == "http://json-schema.org/draft-07/schema#", name
        Draft7Validator.check_schema(param.schema)
    wrong = {
        "integer": "many",
        "string": 7,
        "boolean": "yes",
        "number": "x",
        "array": 3,
        "object": 3,
    }
    for param in params.values():
        kind = param.schema["type"]
        kind = kind[-1] if isinstance(kind, list) else kind
        with pytest.raises(Exception, match=r"valid|type"):
            Param(wrong[kind], **param.schema).resolve()


def test_cluster_names_limit_is_one_from_the_rule():
    """cluster_name's limit is validate's 20 characters: the form's field takes it and
    docs/settings.md states it, in its type and its text alike."""
    assert ParamsDict(dag_params()).get_param("cluster_name").schema["maxLength"] == 20
    rows = (REPO / "docs" / "settings.md").read_text().splitlines()
    row = next(x for x in rows if x.startswith("| `cluster_name`"))
    assert "at most 20 characters of" in row and "63" not in row
