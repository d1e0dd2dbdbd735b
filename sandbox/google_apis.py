"""The read APIs preflight calls, on loopback: Service Usage, Resource Manager, Compute Engine,
Cloud Quotas (quotaInfos.get), Artifact Registry's Docker API and the Hugging Face Hub,
answering from ProjectFacts.

One HTTP server for every host; `endpoints()` is the product's TPU_RL_API_ENDPOINTS (host ->
this server), so the product's own REST calls reach it. Every request is recorded
(`requests`: method, host, path) for the test that proves preflight changes nothing.
"""

from __future__ import annotations

import http.server
import json
import re
from urllib.parse import parse_qs, unquote, urlsplit

from sandbox import discovery
from sandbox.loopback import serve_on_loopback
from sandbox.project_facts import Answer, ProjectFacts, google_error

HOSTS = (
    "serviceusage.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "compute.googleapis.com",
    "cloudquotas.googleapis.com",
    "us-docker.pkg.dev",
    "huggingface.co",
)
_COMPUTE = r"/compute/v1/projects/[^/]+"


class GoogleApisEmulator:
    """Started on construction; `stop()` ends it."""

    def __init__(self, facts: ProjectFacts | None = None) -> None:
        self.facts = facts or ProjectFacts()
        self.requests: list[tuple[str, str, str]] = []
        emulator = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _serve(self, method: str) -> None:
                host, _, path = self.path.lstrip("/").partition("/")
                body = b""
                if self.headers.get("Content-Length"):
                    body = self.rfile.read(int(self.headers["Content-Length"]))
                emulator.requests.append((method, host, "/" + path))
                auth = self.headers.get("Authorization", "")
                # every request and answer checked against Google's discovery documents
                status, headers, payload = discovery.checked(
                    host,
                    method,
                    "/" + path,
                    body,
                    lambda: emulator.answer(method, host, "/" + path, auth, body),
                )
                data = b"" if payload is None else json.dumps(payload).encode()
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if method != "HEAD":
                    self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_HEAD(self) -> None:
                self._serve("HEAD")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_PUT(self) -> None:
                self._serve("PUT")

            def do_PATCH(self) -> None:
                self._serve("PATCH")

            def do_DELETE(self) -> None:
                self._serve("DELETE")

            def log_message(self, *args: object) -> None:
                pass

        self.httpd, self.url = serve_on_loopback(Handler)

    def endpoints(self) -> dict[str, str]:
        """TPU_RL_API_ENDPOINTS: each host at its own path prefix of this server."""
        return {host: f"{self.url}/{host}" for host in HOSTS}

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(self, method: str, host: str, target: str, auth: str, body: bytes) -> Answer:
        split = urlsplit(target)
        path, query = unquote(split.path), parse_qs(split.query)
        if host == "huggingface.co":
            return self._hub(path, auth)
        if not auth.startswith("Bearer "):
            return 401, {"WWW-Authenticate": 'Bearer realm="sandbox"'}, None
        if host == "us-docker.pkg.dev":
            return self._registry(method, path)
        f = self.facts
        if refused := f.disabled(host) if host != "serviceusage.googleapis.com" else None:
            return refused
        if method == "GET" and path.endswith("/services:batchGet"):
            return f.services(query.get("names", []))
        if method == "POST" and path.endswith(":testIamPermissions"):
            return f.test_permissions(json.loads(body or b"{}").get("permissions", []))
        if (
            method == "GET"
            and host == "cloudresourcemanager.googleapis.com"
            and re.fullmatch(r"/v3/projects/[^/:]+", path)
        ):
            return f.project_resource()
        if method == "POST" and path.endswith(":getIamPolicy"):
            return f.iam_policy()
        if method == "GET" and (
            m := re.fullmatch(rf"{_COMPUTE}/zones/([^/]+)/machineTypes/([^/]+)", path)
        ):
            return f.machine_type(*m.groups())
        if method == "GET" and (m := re.fullmatch(rf"{_COMPUTE}/aggregated/(\w+)", path)):
            wanted = re.search(r'name\s*=\s*"?([\w-]+)', query.get("filter", [""])[0])
            return f.aggregated(m.group(1), wanted.group(1) if wanted else "")
        if method == "GET" and (
            m := re.fullmatch(rf"{_COMPUTE}/zones/([^/]+)/reservations/([^/]+)", path)
        ):
            return f.reservation(*m.groups())
        if method == "GET" and (
            m := re.fullmatch(rf"{_COMPUTE}/zones/([^/]+)/futureReservations/([^/]+)", path)
        ):
            return f.future_reservation(*m.groups())
        if method == "GET" and (
            m := re.fullmatch(
                r"/v1/projects/[^/]+/locations/global/services/compute\.googleapis\.com"
                r"/quotaInfos/([^/]+)",
                path,
            )
        ):
            return f.quota_info(m.group(1))
        if method == "GET" and (m := re.fullmatch(rf"{_COMPUTE}/regions/([^/]+)", path)):
            return f.region(m.group(1))
        return google_error(404, f"sandbox: no {method} {host}{path}", "notFound")

    def _registry(self, method: str, path: str) -> Answer:
        match = re.fullmatch(r"/v2/(.+)/manifests/([^/]+)", path)
        if method not in ("GET", "HEAD") or match is None:
            return 404, {}, {"errors": [{"code": "NAME_UNKNOWN", "message": path}]}
        name, ref = match.groups()
        reference = f"us-docker.pkg.dev/{name}{'@' if ':' in ref else ':'}{ref}"
        if reference not in self.facts.images:
            message = f'Failed to fetch "{ref}" from request "/v2/{name}/manifests/{ref}".'
            return 404, {}, {"errors": [{"code": "MANIFEST_UNKNOWN", "message": message}]}
        digest = ref if ":" in ref else "sha256:" + "0" * 64
        return 200, {"Docker-Content-Digest": digest}, {"schemaVersion": 2}

    def _hub(self, path: str, auth: str) -> Answer:
        user = self.facts.hf_tokens.get(auth.removeprefix("Bearer "))
        if path == "/api/whoami-v2":
            if user is None:
                message = "Invalid credentials in Authorization header"
                return 401, {"X-Error-Message": message}, {"error": message}
            access = {"displayName": "sandbox", "role": "read"}
            return 200, {}, {"type": "user", "name": user, "auth": {"accessToken": access}}
        match = re.fullmatch(r"/api/models/(.+)/auth-check", path)
        if match is None:
            return 404, {}, {"error": "Sorry, we can't find the page you are looking for."}
        repo = match.group(1)
        if repo in self.facts.gated and (user, repo) not in self.facts.licences:
            message = (
                f"Access to model {repo} is restricted and you are not in the authorized list. "
                f"Visit https://huggingface.co/{repo} to ask for access."
            )
            return (
                403,
                {"X-Error-Code": "GatedRepo", "X-Error-Message": message},
                {"error": message},
            )
        return 200, {}, None
