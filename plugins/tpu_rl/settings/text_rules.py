"""The length limit and character class of each free-text setting, declared in its field's
metadata (`text`) and enforced twice: as the Param's JSON-schema `maxLength` and `pattern` (the
trigger form and Airflow's Param check refuse the value) and by `validate` (a conf sent through
the API bypasses nothing).

They bound what the other rules then look at: no 10 MiB value, NUL, ANSI escape (ESC is a C0
control) or bidirectional control character reaches a cluster, a log or a notice. The precise
grammar of each kind of name is checked after them (tpu_rl.settings.validation, references).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

# C0 controls (NUL, ESC of the ANSI escapes, newlines), DEL and C1 controls, and the characters
# of Unicode's Bidi_Control property, which reorder what a reader sees (UAX #9, "Explicit
# Directional Formatting Characters", www.unicode.org/reports/tr9/; PropList.txt: 061C,
# 200E..200F, 202A..202E, 2066..2069). Written in the regex syntax Python's re and ECMA-262 (the
# JSON-schema `pattern` dialect, json-schema.org draft-07 section 4.3) share.
_CONTROL = r"\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"


@dataclass(frozen=True)
class TextRule:
    """At most `max_length` characters, each in the regex character class `chars`."""

    chars: str  # e.g. "[a-z0-9-]", or "[^...]" for "anything but"
    max_length: int
    what: str  # the characters allowed, in words

    @property
    def pattern(self) -> str:
        """The JSON-schema `pattern`: the whole value in `chars`. jsonschema matches it with
        re.search, where `$` also matches before a final newline: `(?!\\n)` rules that out (in
        ECMA-262, `$` is the end already)."""
        return f"^{self.chars}*$(?!\\n)"

    def unsafe(self, value: str) -> str | None:
        """Why `value` may not even be quoted (too long, or a control or bidirectional control
        character), without repeating it: it may be 10 MiB."""
        if len(value) > self.max_length:
            return f"is {len(value)} characters long; at most {self.max_length}"
        return _first_outside(f"[^{_CONTROL}]", value, PRINTABLE)

    def off_class(self, value: str) -> str | None:
        """Why `value` has a character outside the rule's class (the value is safe to quote)."""
        return _first_outside(self.chars, value, self.what)


def _first_outside(chars: str, value: str, what: str) -> str | None:
    """The first character of `value` outside the class `chars`, named with its position."""
    outside = "[" + chars[2:] if chars.startswith("[^") else "[^" + chars[1:]
    if bad := re.search(outside, value):
        return f"has {character_name(bad.group())} at position {bad.start() + 1}; it takes {what}"
    return None


def character_name(char: str) -> str:
    """`U+202E (RIGHT-TO-LEFT OVERRIDE)`; controls have no Unicode name."""
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" ({name})" if name else " (a control character)")


def short_repr(value: Any, limit: int = 80) -> str:
    """repr() cut to `limit` characters (an int past Python's digit limit has none)."""
    try:
        text = repr(value)
    except ValueError:
        return "an integer too long to print"
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def text_keywords(rule: TextRule) -> dict[str, Any]:
    """The rule as JSON-schema keywords."""
    return {"maxLength": rule.max_length, "pattern": rule.pattern}


LOWER = "lower-case letters, digits and '-'"
# Google Cloud project IDs: 6-30 lower-case letters, digits, hyphens
# (cloud.google.com/resource-manager/docs/creating-managing-projects, "Project ID requirements").
PROJECT_ID = TextRule("[a-z0-9-]", 30, LOWER)
# Compute Engine names (regions, zones, machine and TPU types, GKE clusters, reservations): RFC
# 1035 labels of at most 63 characters (cloud.google.com/compute/docs/naming-resources).
GCE = TextRule("[a-z0-9-]", 63, LOWER)
# The run's cluster: a Compute Engine name, held to 20 characters by validate (NAME_PATTERNS),
# the one limit the form, the docs and validate state.
CLUSTER_NAME = TextRule("[a-z0-9-]", 20, LOWER)
# A shared reservation is `projects/<project>/reservations/<name>` (capacity_rules).
RESERVATION = TextRule(
    "[a-z0-9/-]",
    len("projects//reservations/") + 30 + 63,
    "lower-case letters, digits, '-' and '/'",
)
# A capacity ladder: comma-separated `mode@zone` rungs (tpu_rl.cluster.ladder), a few dozen.
LADDER = TextRule("[a-z0-9_@, -]", 1024, "lower-case letters, digits, '_', '-', '@', ',' and ' '")
# Bucket names: lower-case letters, digits, '-', '_', '.'; 222 characters with dots
# (cloud.google.com/storage/docs/buckets#naming).
BUCKET = TextRule("[a-z0-9._-]", 222, "lower-case letters, digits, '-', '_' and '.'")
# An IPv4 or IPv6 CIDR block: at most 39 characters of address and "/128".
CIDR = TextRule("[0-9a-fA-F.:/]", 43, "hex digits, '.', ':' and '/'")
VERSION = TextRule("[v0-9.]", 32, "'v', digits and '.'")
TOPOLOGY = TextRule("[0-9x]", 32, "digits and 'x'")
# Kubernetes names: a namespace or a LocalQueue is a DNS-1123 label (63 characters), a service
# account a DNS-1123 subdomain (253): lower-case letters, digits, '-' and, in a subdomain, '.'
# (kubernetes.io/docs/concepts/overview/working-with-objects/names/#dns-label-names).
DNS_LABEL = TextRule("[a-z0-9-]", 63, LOWER)
LOWER_DOTS = "lower-case letters, digits, '-' and '.'"
DNS_SUBDOMAIN = TextRule("[a-z0-9.-]", 253, LOWER_DOTS)
MODEL_NAME = TextRule("[a-z0-9.-]", 63, LOWER_DOTS)
# Hugging Face repo ids: ASCII letters, digits, '.', '_', '-', one '/', at most 96 characters
# (huggingface_hub utils/_validators.py, validate_repo_id).
HF_REPO_ID = TextRule("[A-Za-z0-9._/-]", 96, "ASCII letters, digits, '.', '_', '-' and '/'")
# A Hugging Face revision: a branch or tag (git ref names refuse spaces, control characters and
# ~^:?*[\\, git-check-ref-format(1)) or a commit id; kept to the repo id's characters.
HF_REVISION = TextRule("[A-Za-z0-9._/-]", 255, "ASCII letters, digits, '.', '_', '-' and '/'")
# Image references: [host[:port]/]path[:tag][@algorithm:hex] in ASCII (distribution/reference,
# regexp.go); the name at most 255 characters (reference.go, NameTotalLengthMax), a tag 128, a
# sha512 digest 135.
IMAGE = TextRule(
    "[A-Za-z0-9._:/@+\\[\\]-]", 255 + 1 + 128 + 1 + 135, "ASCII letters, digits and ._:/@+[]-"
)
# Free text a setting hands on whole (a path, JSON, a train_rl key=value flag): printable, at
# most a GCS object name's 1024 bytes (cloud.google.com/storage/docs/objects#naming) or, for
# JSON, 4 KiB.
PRINTABLE = "printable characters (no control or bidirectional control characters)"
FREE_TEXT = TextRule(f"[^{_CONTROL}]", 1024, PRINTABLE)
JSON_TEXT = TextRule(f"[^{_CONTROL}]", 4096, PRINTABLE)
MAX_LIST_ITEMS = 256  # of a list setting (extra_train_args)
