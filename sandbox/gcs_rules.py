"""What Cloud Storage does and gcp-storage-emulator does not: generation preconditions, paged
listings, and a count of the requests and listed entries (for the bench).

- `ifGenerationMatch` on uploads and deletes: "0" means the object must not exist; otherwise
  its live generation must equal it; else HTTP 412 `conditionNotMet`
  (https://cloud.google.com/storage/docs/request-preconditions).
- a media download (objects.get with alt=media) names the object's generation in its
  `x-goog-generation` response header (https://cloud.google.com/storage/docs/xml-api/
  get-object-download, "Response headers"), where google-cloud-storage takes it from
  (google/cloud/storage/blob.py, Blob._extract_headers_from_download: `response.headers.get(
  "X-goog-generation")`): a read-then-write's ifGenerationMatch depends on it.
- an error answer carries Cloud Storage's JSON error body, `{"error": {"code", "message",
  "errors": [{"domain", "reason", "message"}]}}` (https://cloud.google.com/storage/docs/json_api
  /v1/status-codes), where gcp-storage-emulator answers a bare 404 (a missing bucket's "The
  specified bucket does not exist.", a missing object's "No such object: <bucket>/<name>").
- a media download whose `Range: bytes=<first>-[<last>]` starts at or past the object's end
  answers 416 `requestedRangeNotSatisfiable` (https://cloud.google.com/storage/docs/json_api/
  v1/status-codes, "416—Requested Range Not Satisfiable"; RFC 9110 section 14.1.2: a range
  whose first position is not below the length is unsatisfiable), where gcp-storage-emulator
  answers 206 with no bytes.
- objects.list returns at most `maxResults` entries, items and prefixes together, and never
  more than 1,000, with a `nextPageToken`
  (https://cloud.google.com/storage/docs/json_api/v1/objects/list, `maxResults`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

PAGE_LIMIT = 1000
LIST_PATH = re.compile(r"^(?:/storage/v1)?/b/(?P<bucket>[-.\w]+)/o$")
OBJECT_PATH = re.compile(r"^(?:/upload)?(?:/storage/v1)?/b/(?P<bucket>[-.\w]+)/o/(?P<name>.+)$")
DOWNLOAD_PATH = re.compile(r"^/download(?:/storage/v1)?/b/(?P<bucket>[-.\w]+)/o/(?P<name>.+)$")
UPLOAD_PATH = re.compile(r"^/upload(?:/storage/v1)?/b/(?P<bucket>[-.\w]+)/o$")
PRECONDITION_FAILED = {
    "error": {
        "code": 412,
        "message": "At least one of the pre-conditions you specified did not hold.",
        "errors": [
            {
                "message": "At least one of the pre-conditions you specified did not hold.",
                "domain": "global",
                "reason": "conditionNotMet",
                "locationType": "header",
                "location": "If-Match",
            }
        ],
    }
}


@dataclass
class GcsTraffic:
    """Requests served (`METHOD path`) and the entries list answers returned."""

    requests: list[str] = field(default_factory=list)
    listed: int = 0

    def reset(self) -> None:
        self.requests.clear()
        self.listed = 0


def _live_generation(storage: Any, bucket: str, name: str) -> int:
    from gcp_storage_emulator.exceptions import NotFound

    try:
        return int(storage.get_file_obj(bucket, name).get("generation") or 0)
    except NotFound:
        return 0


def _upload_name(query: dict[str, list[str]], body: bytes) -> str | None:
    if query.get("name"):
        return query["name"][0]
    found = re.search(rb'"name"\s*:\s*"((?:[^"\\]|\\.)*)"', body)
    return json.loads(b'"' + found.group(1) + b'"') if found else None


def precondition_failed(
    storage: Any, method: str, path: str, body: bytes
) -> tuple[int, bytes] | None:
    """412 when the request's ifGenerationMatch does not hold; None otherwise."""
    url = urlparse(path)
    query = parse_qs(url.query)
    if "ifGenerationMatch" not in query:
        return None
    wanted = int(query["ifGenerationMatch"][0])
    upload, target = UPLOAD_PATH.match(url.path), OBJECT_PATH.match(url.path)
    if method == "POST" and upload:
        bucket, name = upload.group("bucket"), _upload_name(query, body)
    elif method in ("DELETE", "PATCH", "PUT", "GET") and target:
        bucket, name = target.group("bucket"), unquote(target.group("name"))
    else:
        return None
    if name is None or _live_generation(storage, bucket, name) == wanted:
        return None
    return 412, json.dumps(PRECONDITION_FAILED).encode()


def download_headers(storage: Any, method: str, path: str) -> dict[str, str]:
    """The generation headers of a media download of an existing object; {} otherwise."""
    from gcp_storage_emulator.exceptions import NotFound

    url = urlparse(path)
    download = DOWNLOAD_PATH.match(url.path)
    if method != "GET" or not download or parse_qs(url.query).get("alt") != ["media"]:
        return {}
    try:
        obj = storage.get_file_obj(download.group("bucket"), unquote(download.group("name")))
    except NotFound:
        return {}
    return {
        "x-goog-generation": str(obj.get("generation") or 0),
        "x-goog-metageneration": str(obj.get("metageneration") or 1),
    }


_RANGE = re.compile(r"^\s*bytes=(\d+)-(\d*)\s*$")


def unsatisfiable_range(
    storage: Any, path: str, range_header: str | None
) -> tuple[int, bytes] | None:
    """416 for a media download whose Range starts at or past the object's end; None otherwise."""
    from gcp_storage_emulator.exceptions import NotFound

    url = urlparse(path)
    download = DOWNLOAD_PATH.match(url.path) or OBJECT_PATH.match(url.path)
    found = _RANGE.match(range_header or "")
    if not download or not found or parse_qs(url.query).get("alt") != ["media"]:
        return None
    try:
        size = len(storage.get_file(download.group("bucket"), unquote(download.group("name"))))
    except NotFound:
        return None
    if int(found.group(1)) < size:
        return None
    message = "The requested range cannot be satisfied."
    error = {"code": 416, "message": message}
    error["errors"] = [
        {"message": message, "domain": "global", "reason": "requestedRangeNotSatisfiable"}
    ]
    return 416, json.dumps({"error": error}).encode()


def paged_list(storage: Any, path: str) -> tuple[int, bytes] | None:
    """objects.list as Cloud Storage pages it; None for any other request."""
    from gcp_storage_emulator.exceptions import NotFound

    url = urlparse(path)
    listing = LIST_PATH.match(url.path)
    if not listing:
        return None
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    try:
        items, prefixes = storage.get_file_list(
            listing.group("bucket"), query.get("prefix"), query.get("delimiter")
        )
    except NotFound:
        return 404, b"{}"
    entries = sorted(
        [(obj["name"], "item", obj) for obj in items] + [(p, "prefix", p) for p in prefixes],
        key=lambda entry: entry[0],
    )
    size = min(int(query.get("maxResults") or PAGE_LIMIT), PAGE_LIMIT)
    start = int(query.get("pageToken") or 0)
    page = entries[start : start + size]
    answer: dict[str, Any] = {
        "kind": "storage#objects",
        "items": [value for _, kind, value in page if kind == "item"],
        "prefixes": [value for _, kind, value in page if kind == "prefix"],
    }
    if start + size < len(entries):
        answer["nextPageToken"] = str(start + size)
    return 200, json.dumps(answer).encode()


def _error_message(status: int, path: str) -> str:
    if status == 404 and (target := OBJECT_PATH.match(path) or DOWNLOAD_PATH.match(path)):
        return f"No such object: {target.group('bucket')}/{unquote(target.group('name'))}"
    if status == 404:
        return "The specified bucket does not exist."
    return HTTPStatus(status).phrase


def with_error_body(response: bytes, path: str) -> bytes:
    """An HTTP error response the emulator wrote, with Cloud Storage's JSON error body where
    its own is missing or not of that shape; any other response as it is."""
    head, _, data = response.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    if status < 400:
        return response
    try:
        error = json.loads(data).get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict) and error.get("code") == status and error.get("message"):
        return response
    reason = {400: "invalid", 404: "notFound", 409: "conflict"}.get(status, "backendError")
    message = _error_message(status, urlparse(path).path)
    error = {"code": status, "message": message}
    error["errors"] = [{"message": message, "domain": "global", "reason": reason}]
    body = json.dumps({"error": error}).encode()
    kept = [line for line in lines[1:] if not line.lower().startswith(("content-", "x-goog"))]
    headers = [*kept, "Content-Type: application/json", f"Content-Length: {len(body)}"]
    return "\r\n".join([lines[0], *headers]).encode("latin-1") + b"\r\n\r\n" + body
