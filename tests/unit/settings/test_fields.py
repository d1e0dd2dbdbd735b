"""tpu_rl.settings.fields: every setting declared with its title, description, type and bounds."""

from __future__ import annotations

import re

from tpu_rl.settings.metadata import describe, json_type, maxtext_flag
from tpu_rl.settings.run_settings import (
    SETTING_FIELDS,
)


def test_every_setting_has_a_title_a_description_and_a_json_type():
    for name, f in SETTING_FIELDS.items():
        assert f.metadata["title"] and describe(f), name
    plain = {str(f.type) for f in SETTING_FIELDS.values() if not f.metadata["choices"]}
    assert plain <= {"str", "int", "float", "bool", "list[str]", "dict[str, float]"}
    for f in SETTING_FIELDS.values():
        if f.metadata["choices"]:
            assert str(f.type) == f.metadata["choices"].__name__ and json_type(f) == "string"


def test_every_integer_setting_declares_its_bounds_and_only_integers_do():
    for name, f in SETTING_FIELDS.items():
        assert (f.metadata["bounds"] is not None) == (str(f.type) == "int"), name


def test_every_description_says_what_the_setting_does_in_plain_text():
    """The form shows a Param's description as text: no Markdown; a MaxText flag's name comes
    after what the setting does, never alone (not only "MaxText x.")."""
    for name, f in SETTING_FIELDS.items():
        text = describe(f)
        assert "`" not in text and "*" not in text and "|" not in text, name
        assert not re.fullmatch(r"MaxText [\w.]+\.", text), name
        own_words = f.metadata["description"]
        assert len(own_words.split()) >= 4 and not own_words.startswith("MaxText "), name
        if flag := maxtext_flag(f):
            assert text == f"{own_words} MaxText flag: {flag}.", name
