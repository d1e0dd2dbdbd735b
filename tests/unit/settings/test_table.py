"""tpu_rl.settings.table: docs/settings.md is what the settings declare: each setting's type,
default and description in its form section's table."""

from __future__ import annotations

import pytest

from tests.conftest import REPO
from tpu_rl.settings.metadata import Section
from tpu_rl.settings.run_settings import SETTING_FIELDS
from tpu_rl.settings.table import settings_document, settings_table, value_type


def test_the_settings_reference_is_what_the_settings_declare():
    """docs/settings.md is generated: python -m tpu_rl.settings.table docs/settings.md."""
    text = (REPO / "docs" / "settings.md").read_text()
    assert text == settings_document(), "docs/settings.md is stale: regenerate it"
    for name in SETTING_FIELDS:
        assert f"| `{name}` |" in text, name


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("num_batches", "integer, 1 to 10000000"),
        ("max_spend_usd", "number, 0 or more"),
        ("capacity", "one of `reservation`, `calendar`, `flex_start`, `spot`"),
        ("topology", "string, at most 32 characters of"),
        ("extra_train_args", "list of at most 256 strings, each at most 1024 characters of"),
    ],
)
def test_each_settings_type_says_its_choices_bounds_or_text_rule(name, shown):
    assert value_type(SETTING_FIELDS[name]).startswith(shown)


def test_a_required_setting_shows_required_and_the_others_their_default():
    table = settings_table(Section.ESSENTIALS)
    assert "| `project` | string, at most 30 characters of" in table
    assert "| required |" in table.split("| `project` |")[1].splitlines()[0]
    assert "| `num_batches` | integer, 1 to 10000000 | `50` |" in table
