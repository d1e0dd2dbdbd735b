"""Google's own API schemas as the sandbox's contract: every request a Google API emulator takes
and every answer it gives is checked against the API's discovery document.

The documents are google-api-python-client's (googleapiclient/discovery_cache/documents/, a
pinned in requirements.lock, google-api-python-client==2.202.0, which the google provider
brings: requirements.txt does not name it), read with
`googleapiclient.discovery_cache.get_static_doc`. A request is matched to its method by HTTP
method and path (servicePath + flatPath, else path; a media upload's or download's own path);
its query parameters must be the method's or the platform's system parameters, its JSON body
must fit the method's `request` schema. A misfit is answered with the 400 Google gives
(`refusal`). An answer that does not fit the method's `response` schema is a sandbox bug:
`verify` raises SchemaMismatch, and `checked` turns it into a loud answer naming the mismatch
(status SANDBOX_BUG).

Types follow the proto3 JSON mapping (https://protobuf.dev/programming-guides/json/): int64,
uint64 (discovery `type: string, format: int64`) are JSON strings in answers, and a request
may give them as numbers or strings; int32 likewise accepts a string in a request; an enum is
its name (or its number in a request); a request's `null` is the field's default.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cache
from typing import Any
from urllib.parse import parse_qs, urlsplit

from googleapiclient.discovery_cache import get_static_doc

Answer = tuple[int, dict[str, str], Any]  # status, headers, JSON body (None: empty)

# host -> (api, version) of the shipped documents the sandbox's emulators stand for. A host
# not listed (Cloud Quotas: cloudquotas is not among the shipped documents; Artifact Registry's
# Docker endpoint us-docker.pkg.dev and the Hugging Face Hub are not discovery APIs) passes
# unchecked.
APIS = {
    "compute.googleapis.com": ("compute", "v1"),
    "container.googleapis.com": ("container", "v1"),
    "serviceusage.googleapis.com": ("serviceusage", "v1"),
    "cloudresourcemanager.googleapis.com": ("cloudresourcemanager", "v3"),
    "storage.googleapis.com": ("storage", "v1"),
    "aiplatform.googleapis.com": ("aiplatform", "v1"),
    "tpu.googleapis.com": ("tpu", "v2"),
    "composer.googleapis.com": ("composer", "v1"),
    "artifactregistry.googleapis.com": ("artifactregistry", "v1"),
}
# A regional endpoint (us-central1-aiplatform.googleapis.com) serves the global API's methods
# (aiplatform.v1.json `endpoints`: "https://us-central1-aiplatform.googleapis.com/" ...).
_REGIONAL = re.compile(r"^[a-z]+-[a-z]+\d+-(?=[a-z]+\.googleapis\.com$)")
# System parameters every Google REST API takes, as `name` or `$name`
# (https://cloud.google.com/apis/docs/system-parameters, "Definitions"); the documents list
# their own `parameters` besides (alt, fields, prettyPrint, ...).
SYSTEM_PARAMETERS = {
    "alt",
    "callback",
    "fields",
    "key",
    "prettyPrint",
    "quotaUser",
    "userIp",
    "userProject",
    "outputDefaults",
    "apiFormatVersion",
    ".xgafv",
    "uploadType",
    "upload_protocol",
    "access_token",
    "oauth_token",
}
# proto field types named in Google's "Invalid value at ..." messages
_PROTO_TYPES = {
    "int64": "TYPE_INT64",
    "uint64": "TYPE_UINT64",
    "int32": "TYPE_INT32",
    "uint32": "TYPE_UINT32",
    "double": "TYPE_DOUBLE",
    "float": "TYPE_FLOAT",
    "byte": "TYPE_BYTES",
}
# The status of an answer the sandbox got wrong: no Google status, so no client retries it
# (google-cloud-storage and google-api-core retry 500) and the test fails at once.
SANDBOX_BUG = 599
_INTEGER = re.compile(r"^-?\d+$")
_DURATION = re.compile(r"^-?\d+(\.\d{1,9})?s$")


class SchemaMismatch(AssertionError):
    """A sandbox answer the API's discovery document does not allow: a sandbox bug."""


@dataclass(frozen=True)
class Method:
    """One discovery method and the path pattern that reaches it."""

    api: str
    version: str
    http_method: str
    pattern: re.Pattern[str]
    literal: int  # characters of the template outside its {variables}: the more, the closer
    spec: dict[str, Any]
    media: bool  # an upload's or download's path: its body and answer are media, not JSON

    @property
    def id(self) -> str:
        return str(self.spec["id"])


@dataclass(frozen=True)
class Misfit:
    """Where a value leaves its schema: a dotted proto path, and what is wrong there."""

    path: str
    unknown: str = ""  # an unknown field's name, else a wrong value
    value: Any = None
    expected: str = ""

    def message(self) -> str:
        if self.unknown:
            at = f" at '{self.path}'" if self.path else ""
            unknown = f'Unknown name "{self.unknown}"{at}'
            return f"Invalid JSON payload received. {unknown}: Cannot find field."
        return f"Invalid value at '{self.path}' ({self.expected}), {json.dumps(self.value)}"

    def field(self) -> str:
        return ".".join(p for p in (self.path, _snake(self.unknown)) if p)


@cache
def document(api: str, version: str) -> dict[str, Any]:
    text = get_static_doc(api, version)
    if text is None:
        raise LookupError(f"googleapiclient ships no discovery document {api}.{version}")
    return json.loads(text)


def _template_pattern(template: str) -> tuple[re.Pattern[str], int]:
    """A URI template's regex: `{+name}` spans slashes, `{name}` is one segment without ':'
    (a custom verb such as `models/{id}:mergeVersionAliases` follows a colon)."""
    parts, literal, at = [], 0, 0
    for var in re.finditer(r"\{(\+?)[^}]+\}", template):
        text = template[at : var.start()]
        parts.append(re.escape(text))
        literal += len(text)
        parts.append(".+" if var.group(1) else "[^/:]+")
        at = var.end()
    parts.append(re.escape(template[at:]))
    literal += len(template) - at
    return re.compile("".join(parts)), literal


def _walk(resource: dict[str, Any]) -> list[dict[str, Any]]:
    found = list((resource.get("methods") or {}).values())
    for child in (resource.get("resources") or {}).values():
        found += _walk(child)
    return found


@cache
def methods(api: str, version: str) -> tuple[Method, ...]:
    """Every method of the document with the paths that reach it: the REST path, a media
    upload's protocol paths and a media download's /download/ path (storage.v1.json's
    `useMediaDownloadService`)."""
    doc = document(api, version)
    found = []
    for spec in _walk(doc):
        rest = "/" + doc["servicePath"] + (spec.get("flatPath") or spec["path"])
        templates = [(rest, False)]
        for protocol in ((spec.get("mediaUpload") or {}).get("protocols") or {}).values():
            templates.append((protocol["path"], True))
        if spec.get("useMediaDownloadService"):
            templates.append(("/download" + rest, True))
        for template, media in templates:
            pattern, literal = _template_pattern(template)
            found.append(Method(api, version, spec["httpMethod"], pattern, literal, spec, media))
    return tuple(found)


def api_of(host: str) -> tuple[str, str] | None:
    return APIS.get(_REGIONAL.sub("", host))


def find_method(host: str, http_method: str, path: str) -> Method | None:
    """The method a request reaches (path still percent-encoded); None for a host without a
    shipped document or a path no method has (the emulator answers that one itself)."""
    api = api_of(host)
    if api is None:
        return None
    matches = [
        m for m in methods(*api) if m.http_method == http_method and m.pattern.fullmatch(path)
    ]
    return max(matches, key=lambda m: m.literal, default=None)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _join(path: str, name: str) -> str:
    return f"{path}.{_snake(name)}" if path else _snake(name)


def _body_field(schema_id: str) -> str:
    """The request message's field the body fills: none for a whole `...Request` message
    (HTTP body "*"), else the resource's name (`reservation` for Compute's Reservation,
    `model` for GoogleCloudAiplatformV1Model), as the `at '...'` of Google's messages reads."""
    if schema_id.endswith("Request"):
        return ""
    bare = re.sub(r"^Google(?:Cloud)?[A-Za-z]*?V\d+(?:[a-z]+\d*)?(?=[A-Z])", "", schema_id)
    return _snake(bare[:1].lower() + bare[1:])


def _is_datetime(value: str) -> bool:
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return "T" in value


def _scalar_misfit(value: Any, schema: dict[str, Any], path: str, answer: bool) -> Misfit | None:
    kind, fmt = schema.get("type"), schema.get("format", "")
    expected = _PROTO_TYPES.get(fmt) or f"TYPE_{str(kind).upper()}"
    if kind == "boolean":
        expected = "TYPE_BOOL"
    wrong = Misfit(path, value=value, expected=expected)
    if kind == "any":
        return None
    if kind == "boolean":
        return None if isinstance(value, bool) else wrong
    if kind == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            return None
        return None if not answer and isinstance(value, str) and _INTEGER.match(value) else wrong
    if kind == "number":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return None
        return None if value in ("NaN", "Infinity", "-Infinity") else wrong
    if kind != "string":
        return wrong
    if fmt in ("int64", "uint64"):
        if isinstance(value, str) and _INTEGER.match(value):
            return None
        numeric = isinstance(value, int) and not isinstance(value, bool)
        return None if numeric and not answer else wrong
    if "enum" in schema:
        if value in schema["enum"]:
            return None
        numbered = isinstance(value, int) and not isinstance(value, bool)
        in_range = numbered and 0 <= value < len(schema["enum"])
        return None if in_range else Misfit(path, value=value, expected="TYPE_ENUM")
    if not isinstance(value, str):
        return wrong
    if fmt in ("google-datetime", "date-time") and not _is_datetime(value):
        return Misfit(path, value=value, expected="type.googleapis.com/google.protobuf.Timestamp")
    if fmt == "google-duration" and not _DURATION.match(value):
        return Misfit(path, value=value, expected="type.googleapis.com/google.protobuf.Duration")
    return None


def misfit(
    value: Any, schema: dict[str, Any], doc: dict[str, Any], path: str, answer: bool
) -> Misfit | None:
    """The first place `value` leaves `schema` (None: it fits). `answer`: the stricter rules
    of what Google sends (int64 as strings, no nulls)."""
    if "$ref" in schema:
        return misfit(value, doc["schemas"][schema["$ref"]], doc, path, answer)
    if value is None:
        return Misfit(path, value=None, expected="a value") if answer else None
    kind = schema.get("type")
    if kind == "array":
        if not isinstance(value, list):
            return Misfit(path, value=value, expected="a list")
        for i, item in enumerate(value):
            if found := misfit(item, schema.get("items") or {}, doc, f"{path}[{i}]", answer):
                return found
        return None
    if kind == "object":
        if not isinstance(value, dict):
            return Misfit(path, value=value, expected=f"TYPE_MESSAGE {schema.get('id', '')}")
        properties, extra = schema.get("properties"), schema.get("additionalProperties")
        for name, item in value.items():
            if properties is not None and name in properties:
                found = misfit(item, properties[name], doc, _join(path, name), answer)
            elif extra is not None:
                found = misfit(item, extra, doc, f"{path}[{json.dumps(name)}]", answer)
            elif properties is None or name == "@type":  # a free-form object, an Any's type
                found = None
            else:
                found = Misfit(path, unknown=name)
            if found:
                return found
        return None
    return _scalar_misfit(value, schema, path, answer)


def _invalid_argument(message: str, field: str) -> Answer:
    """Google's 400 (https://cloud.google.com/apis/design/errors: `error.code`, `message`,
    `status` INVALID_ARGUMENT, and a google.rpc.BadRequest detail naming the field)."""
    violation = {"field": field, "description": message}
    details = [
        {"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [violation]}
    ]
    error = {"code": 400, "message": message, "status": "INVALID_ARGUMENT", "details": details}
    return 400, {}, {"error": error}


def _query_refusal(method: Method, query: dict[str, list[str]]) -> Answer | None:
    doc = document(method.api, method.version)
    parameters = {**doc.get("parameters", {}), **(method.spec.get("parameters") or {})}
    for name, values in query.items():
        # `$alt=json;enum-encoding=int` (google-api-core's REST transports) is the system
        # parameter, whose values are the platform's, not the document's `alt` enum
        if name.removeprefix("$") in SYSTEM_PARAMETERS and name not in parameters:
            continue
        spec = parameters.get(name)
        if spec is None or spec.get("location") == "path":
            message = (
                f'Invalid JSON payload received. Unknown name "{name}": Cannot bind query '
                f"parameter. Field '{name}' could not be found in request message."
            )
            return _invalid_argument(message, name)
        if len(values) > 1 and not spec.get("repeated"):
            message = f"Invalid value at '{_snake(name)}': more than one value given."
            return _invalid_argument(message, name)
        for value in values:
            if found := _query_value_misfit(value, spec, _snake(name)):
                return _invalid_argument(found.message(), found.path)
    return None


def _query_value_misfit(value: str, spec: dict[str, Any], path: str) -> Misfit | None:
    """A query parameter is text: a number's, a boolean's or an enum's spelling must parse."""
    kind = spec.get("type")
    if kind == "boolean":
        parsed: Any = {"true": True, "false": False}.get(value, value)
    elif kind == "integer" and _INTEGER.match(value):
        parsed = int(value)
    elif kind == "number":
        try:
            parsed = float(value)
        except ValueError:
            parsed = value
    else:
        parsed = value
    return _scalar_misfit(parsed, spec, path, answer=False)


def refusal(host: str, http_method: str, target: str, body: bytes) -> Answer | None:
    """Google's 400 for a request its method's schema refuses; None when it fits (or no
    shipped document covers it)."""
    split = urlsplit(target)
    method = find_method(host, http_method, split.path)
    if method is None:
        return None
    refused = _query_refusal(method, parse_qs(split.query, keep_blank_values=True))
    if refused or method.media or not body.strip():
        return refused
    request = method.spec.get("request")
    try:
        value = json.loads(body)
    except ValueError as err:
        return _invalid_argument(f"Invalid JSON payload received. {err}", "")
    if request is None:
        return None
    found = misfit(value, request, document(method.api, method.version), "", answer=False)
    if found is None:
        return None
    prefix = _body_field(request["$ref"]) if "$ref" in request else ""
    found = replace(found, path=".".join(p for p in (prefix, found.path) if p))
    return _invalid_argument(found.message(), found.field())


def verify(host: str, http_method: str, target: str, status: int, payload: Any) -> None:
    """SchemaMismatch when an answer is not what the method's `response` schema (or, for an
    error, Google's error shape) allows."""
    method = find_method(host, http_method, urlsplit(target).path)
    if method is None or http_method == "HEAD":
        return
    where = f"{method.id} ({http_method} {target}) answered {status}"
    if status >= 400:
        error = payload.get("error") if isinstance(payload, dict) else None
        if not isinstance(error, dict) or error.get("code") != status:
            raise SchemaMismatch(f"{where}: not Google's error shape: {payload!r}")
        if not isinstance(error.get("message"), str):
            raise SchemaMismatch(f"{where}: error without a message: {payload!r}")
        return
    if method.media:
        return
    response = method.spec.get("response")
    if response is None:
        if payload not in (None, {}, ""):
            raise SchemaMismatch(f"{where}: a body where the method answers none: {payload!r}")
        return
    found = misfit(payload, response, document(method.api, method.version), "", answer=True)
    if found is not None:
        problem = f"unknown field {found.field()!r}" if found.unknown else found.message()
        raise SchemaMismatch(f"{where}, not a {response.get('$ref')}: {problem}")


def checked(
    host: str, http_method: str, target: str, body: bytes, answer: Callable[[], Answer]
) -> Answer:
    """The emulator's `answer()` behind both checks: Google's 400 for a request the schema
    refuses, and a SANDBOX_BUG answer naming the mismatch for an answer the schema does not
    allow."""
    if refused := refusal(host, http_method, target, body):
        return refused
    status, headers, payload = answer()
    try:
        verify(host, http_method, target, status, payload)
    except SchemaMismatch as err:
        message = f"sandbox bug, answer outside the discovery document: {err}"
        return (
            SANDBOX_BUG,
            {},
            {"error": {"code": SANDBOX_BUG, "message": message, "status": "INTERNAL"}},
        )
    return status, headers, payload


def checked_response_bytes(host: str, http_method: str, target: str, response: bytes) -> bytes:
    """A whole HTTP response another server wrote (gcp-storage-emulator's), checked as
    `checked` checks an answer: itself when it fits, else a SANDBOX_BUG answer naming the
    mismatch."""
    head, _, data = response.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    json_body = any(
        line.lower().startswith("content-type:") and "json" in line.lower() for line in lines
    )
    try:
        payload = json.loads(data) if json_body and data.strip() else None
        if json_body or status >= 400:
            verify(host, http_method, target, status, payload)
    except (SchemaMismatch, ValueError) as err:
        message = f"sandbox bug, answer outside the discovery document: {err}"
        body = json.dumps(
            {"error": {"code": SANDBOX_BUG, "message": message, "status": "INTERNAL"}}
        )
        return (
            f"HTTP/1.0 {SANDBOX_BUG} Sandbox Bug\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n{body}"
        ).encode()
    return response
