"""Strict validation of rendered objects: core kinds against Kubernetes 1.35, JobSets the CRD."""

from __future__ import annotations

import functools
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from tests.conftest import JOBSET_CRD

KUBERNETES_VERSION = "1.35.0"


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with unknown fields forbidden wherever it lists properties."""
    schema = dict(schema)
    if "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        schema["properties"] = {k: _closed(v) for k, v in schema["properties"].items()}
        schema.setdefault("additionalProperties", False)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            schema[key] = _closed(schema[key])
    return schema


@functools.cache
def jobset_schema() -> dict[str, Any]:
    crd = yaml.safe_load(JOBSET_CRD.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha2")
    schema = _closed(version["schema"]["openAPIV3Schema"])
    # metadata is validated by the API server's ObjectMeta, not the CRD's schema
    schema["properties"]["metadata"] = {"type": "object"}
    return schema


def validate_manifest(obj: dict[str, Any]) -> None:
    """Raise when the object would not pass the cluster's validation."""
    if obj["kind"] == "JobSet":
        jsonschema.validate(obj, jobset_schema())
    else:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
