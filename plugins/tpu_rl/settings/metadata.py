"""What a setting's dataclass field carries in its metadata, and how to read it.

The keys: `title` (the form's label), `description` (what the setting does, in a user's words:
the trigger form's and docs/settings.md's text), `section` (the form's section), `bounds` (an
integer's (minimum, maximum)), `at_least` (a number's floor: validate refuses a smaller value,
nan, which no comparison catches, and inf), `required` (no default: the form marks it, and a run
needs it filled), `may_be_empty` (an emptied field, which the form sends as null, reads as empty
rather than as the default), `maxtext` (the train_rl key=value flag the setting becomes: True
for the flag of its own name), `choices` (the StrEnum of its values) and `text` (a free-text
setting's length limit and character class, tpu_rl.settings.text_rules; a list's: of each item).

A description is plain text: Airflow's form shows a Param's `description` as text, not Markdown
(so no backticks). A setting that becomes a MaxText flag gets the flag's name after its text
(describe); a name in capitals is the tutorial's environment variable.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
from enum import StrEnum
from typing import Any

from tpu_rl.settings import text_rules
from tpu_rl.settings.text_rules import TextRule

DAY = 24 * 60  # minutes
# Bounds well past any real run, so that a typo such as 10**400 is a settings error rather than
# an OverflowError somewhere later.
COUNT = (1, 4096)
LENGTH = (1, 1_048_576)
AXIS = (-1, 4096)  # -1: auto, for one of the trainer's three axes; the mesh rule checks the rest
_JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
OBJECT_TYPE = "dict[str, float]"  # a setting of metric names to numbers: a JSON object


class Section(StrEnum):
    """The trigger form's sections, in form order; each makes the fields filed under it.

    Airflow 3.3's trigger form opens one section at a time: the one named "Run Parameters" when
    the form opens, each other one on a click, closing the open one (the installed bundle
    airflow/ui/dist/assets/index-*.js: ConfigForm's Accordion.Root is `collapsible` with
    `defaultValue: ["Run Parameters"]`, its flexibleFormDefaultSection, and no `multiple`). So
    the settings a user changes in the tutorial are filed under that name, wherever they are
    declared: the form lists a section's fields where its first field is declared.
    """

    ESSENTIALS = "Run Parameters"
    CLOUD = "Google Cloud"
    MODEL = "Model"
    GRPO = "GRPO"
    RUN = "Run control"

    def setting(
        self,
        default: Any,
        title: str,
        *,
        description: str,
        bounds: tuple[int, int] | None = None,
        at_least: float | None = None,
        required: bool = False,
        may_be_empty: bool = False,
        maxtext: str | bool = False,
        choices: type[StrEnum] | None = None,
        text: TextRule | None = None,
    ) -> Any:
        """A dataclass field carrying the setting's metadata (the module's docstring)."""
        meta = {
            "title": title,
            "description": description,
            "section": self,
            "bounds": bounds,
            "at_least": at_least,
            "required": required,
            "may_be_empty": may_be_empty,
            "maxtext": maxtext,
            "choices": choices,
            "text": text,
        }
        if isinstance(default, list | dict):
            return field(default_factory=lambda: type(default)(default), metadata=meta)
        return field(default=default, metadata=meta)

    def required_name(self, title: str, text: TextRule, *, description: str) -> Any:
        """A name the run cannot do without: required, no default."""
        return self.setting("", title, description=description, required=True, text=text)

    def image(self, default: str, title: str, *, description: str) -> Any:
        """A container image reference."""
        return self.setting(default, title, description=description, text=text_rules.IMAGE)

    def choice(self, choices: type[StrEnum], title: str, *, description: str) -> Any:
        """A setting taking one of `choices`' values; the first is the default."""
        return self.setting(next(iter(choices)), title, description=description, choices=choices)

    def maxtext(self, default: Any, title: str, **keywords: Any) -> Any:
        """A train_rl flag of the setting's own name."""
        return self.setting(default, title, maxtext=True, **keywords)

    def limit(self, default: int, step: str, most: int, *, description: str) -> Any:
        """A time limit in minutes for one step of the run, at most `most` minutes."""
        title = f"{step} timeout (min)"
        return self.setting(default, title, description=description, bounds=(1, most))


def default_of(f: dataclasses.Field[Any]) -> Any:
    """A setting's default value."""
    return f.default_factory() if callable(f.default_factory) else f.default


def maxtext_flag(f: dataclasses.Field[Any]) -> str | None:
    """The train_rl flag a setting becomes, if it becomes one."""
    flag = f.metadata["maxtext"]
    return f.name if flag is True else flag or None


def describe(f: dataclasses.Field[Any]) -> str:
    """A setting's description in a user's words, then the MaxText flag it becomes, if any."""
    flag = maxtext_flag(f)
    description: str = f.metadata["description"]
    return description + (f" MaxText flag: {flag}." if flag else "")


def json_type(f: dataclasses.Field[Any]) -> str:
    """The JSON-schema type of a setting."""
    if f.metadata["choices"]:
        return "string"
    if str(f.type) == OBJECT_TYPE:
        return "object"
    return _JSON_TYPES.get(str(f.type), "array")


def plain(value: Any) -> Any:
    """A value as JSON holds it: an enum member as its value."""
    return value.value if isinstance(value, StrEnum) else value
