"""Vertex AI Model Registry's REST API on loopback: the methods a promotion calls (models.get,
models.upload and models.mergeVersionAliases), as the v1 REST reference describes them, over
models kept in memory. Every call is recorded (`calls`: method, path, JSON body); `fail_next`
answers the next call of a method with an error (an outage, a refused permission).

`endpoint_for(region)` is the product's TPU_RL_API_ENDPOINTS entry for the regional host, so
the product's REST client (tpu_rl.promotion.registry) reaches it unchanged.
"""

from __future__ import annotations

import http.server
import json
import re
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from sandbox import discovery
from sandbox.loopback import send_json, serve_on_loopback

_LOCATION = r"/v1/projects/([^/]+)/locations/([^/]+)"
# https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.models/upload
UPLOAD = re.compile(rf"{_LOCATION}/models:upload")
# .../projects.locations.models/mergeVersionAliases: name = models/<id>@<version id>
MERGE = re.compile(rf"{_LOCATION}/models/([^/@]+)@([^/:]+):mergeVersionAliases")
# .../projects.locations.models/get: name = models/<id>, or models/<id>@<version id or alias>
# ("In order to retrieve a specific version of the model, also provide the version ID or version
# alias ... If no version ID or alias is specified, the "default" version will be returned":
# googleapiclient/discovery_cache/documents/aiplatform.v1.json, models.get's `name`)
GET = re.compile(rf"{_LOCATION}/models/([^/@:]+)(?:@([^/:]+))?")
API_HOST = "aiplatform.googleapis.com"  # every region's endpoint serves aiplatform.v1
UPLOAD_RESPONSE = "type.googleapis.com/google.cloud.aiplatform.v1.UploadModelResponse"


@dataclass
class Call:
    method: str
    path: str
    body: dict[str, Any]


@dataclass
class ModelRecord:
    """A registry model: its versions in order, each a Model's fields plus `aliases`."""

    name: str
    versions: list[dict[str, Any]] = field(default_factory=list)

    def version(self, version_id: str) -> dict[str, Any] | None:
        return next((v for v in self.versions if v["versionId"] == version_id), None)

    def alias_holder(self, alias: str) -> str | None:
        return next((v["versionId"] for v in self.versions if alias in v["versionAliases"]), None)


def _error(code: int, status: str, message: str) -> tuple[int, dict[str, Any]]:
    """A Google API error body (https://cloud.google.com/apis/design/errors#http_mapping)."""
    return code, {"error": {"code": code, "message": message, "status": status}}


class VertexRegistryFake:
    """Started on construction; `stop()` ends it."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.models: dict[str, ModelRecord] = {}
        self.failures: dict[str, tuple[int, dict[str, Any]]] = {}
        self.lock = threading.Lock()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.do_POST()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                body = json.loads(raw or b"{}")
                path = unquote(urlsplit(self.path).path)

                def answered() -> discovery.Answer:
                    status, payload = fake.answer(self.command, path, body)
                    return status, {}, payload

                with fake.lock:
                    fake.calls.append(Call(self.command, path, body))
                    # every request and answer checked against aiplatform.v1's document
                    status, _, payload = discovery.checked(
                        API_HOST, self.command, self.path, raw, answered
                    )
                send_json(self, status, payload)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd, self.url = serve_on_loopback(Handler)

    def endpoint_for(self, region: str) -> dict[str, str]:
        return {f"{region}-aiplatform.googleapis.com": self.url}

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def fail_next(self, method: str, code: int = 503, status: str = "UNAVAILABLE") -> None:
        """Answer the next call of `method` ("get", "upload" or "mergeVersionAliases") with
        this error instead of doing it."""
        self.failures[method] = _error(code, status, f"fake Vertex: {method} failed")

    def answer(self, verb: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if verb == "GET" and (m := GET.fullmatch(path)):
            return self.failures.pop("get", None) or self._get(*m.groups())
        if verb == "POST" and (m := UPLOAD.fullmatch(path)):
            return self.failures.pop("upload", None) or self._upload(*m.groups(), body)
        if verb == "POST" and (m := MERGE.fullmatch(path)):
            aliases = body.get("versionAliases") or []
            failed = self.failures.pop("mergeVersionAliases", None)
            return failed or self._merge(*m.groups(), aliases)
        return _error(404, "NOT_FOUND", f"fake Vertex: no {verb} {path}")

    def _get(
        self, project: str, region: str, model_id: str, version: str | None
    ) -> tuple[int, dict]:
        record = self.models.get(model_id)
        location = f"projects/{project}/locations/{region}"
        if record is None or not record.name.startswith(f"{location}/"):
            return _error(404, "NOT_FOUND", f"Model {location}/models/{model_id} does not exist.")
        # a version id, else an alias; none: the version holding `default`
        wanted = record.version(version or "") or next(
            (v for v in record.versions if (version or "default") in v["versionAliases"]), None
        )
        if wanted is None:
            return _error(404, "NOT_FOUND", f"Model {record.name}@{version} does not exist.")
        return 200, {**wanted, "name": record.name}

    def _upload(self, project: str, region: str, body: dict[str, Any]) -> tuple[int, dict]:
        location = f"projects/{project}/locations/{region}"
        if parent := body.get("parentModel"):
            record = self.models.get(parent.rpartition("/")[2])
            if record is None or not parent.startswith(f"{location}/models/"):
                return _error(404, "NOT_FOUND", f"Model {parent} does not exist.")
        else:
            model_id = body.get("modelId") or str(len(self.models) + 1)
            if model_id in self.models:
                return _error(409, "ALREADY_EXISTS", f"Model {model_id} already exists.")
            record = self.models[model_id] = ModelRecord(f"{location}/models/{model_id}")
        version_id = str(len(record.versions) + 1)
        # the first version of a model gets the `default` alias (Vertex's model-alias docs)
        aliases = ["default"] if not record.versions else []
        record.versions.append(
            {**body["model"], "versionId": version_id, "versionAliases": aliases}
        )
        operation = {
            "name": f"{location}/operations/{len(self.calls)}",
            "done": True,
            "response": {
                "@type": UPLOAD_RESPONSE,
                "model": record.name,
                "modelVersionId": version_id,
            },
        }
        return 200, operation

    def _merge(
        self, project: str, region: str, model_id: str, version_id: str, aliases: list[str]
    ) -> tuple[int, dict]:
        record = self.models.get(model_id)
        version = record.version(version_id) if record else None
        if version is None:
            return _error(404, "NOT_FOUND", f"Model {model_id}@{version_id} does not exist.")
        for alias in aliases:
            if alias.startswith("-"):
                version["versionAliases"].remove(alias[1:])
                continue
            # an alias on another version moves (Vertex's model-alias docs)
            for other in record.versions:
                if alias in other["versionAliases"]:
                    other["versionAliases"].remove(alias)
            version["versionAliases"].append(alias)
        return 200, {**version, "name": record.name}
