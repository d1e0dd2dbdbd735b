"""The Cloud Billing Catalog API's services.skus.list, on loopback, for `make prices`
(tools/prices.py): GET /v1/services/<service id>/skus, paged (pageSize, pageToken), answering
with the SKUs it holds.

Each answer is a ListSkusResponse built from google-cloud-billing's own message types
(google.cloud.billing_v1.types.cloud_catalog: Sku, Category, PricingInfo, PricingExpression,
TierRate with a google.type.Money unit price) and written with the library's JSON mapping, so
what the client parses has the schema the client library says. A request must carry the API
key (the `key` parameter or the x-goog-api-key header, as the client sends it); another answers
Google's 403, an unknown service 404.
"""

from __future__ import annotations

import http.server
import json
import zlib
from typing import Any
from urllib.parse import parse_qs, urlsplit

from sandbox.loopback import send_json, serve_on_loopback
from sandbox.project_facts import google_error

HOST = "cloudbilling.googleapis.com"
COMPUTE_SERVICE = "6F81-5844-456A"  # Compute Engine's service id, whose SKUs price TPU chips
API_KEY = "sandbox-billing-key"
DEFAULT_PAGE_SIZE = 5000  # ListSkusRequest.page_size: "Defaults to 5000"


def tpu_sku(word: str, region: str, usd: float, *, spot: bool = False, usage: str = "OnDemand"):
    """A TPU chip-hour SKU as the catalogue lists them under Compute Engine: `word` (TpuV5p,
    TpuV6e) in its description, Preemptible there for Spot (whose usageType stays OnDemand),
    one region, one tier at `usd` an hour (sky/catalog/data_fetchers/fetch_gcp.py,
    skypilot-org/skypilot: get_tpu_df and _get_unit_price read them so)."""
    from google.cloud import billing_v1
    from google.type import money_pb2

    units = int(usd)
    description = f"{'Preemptible ' if spot else ''}{word} chip-hour running in {region}"
    sku_id = f"{zlib.crc32(description.encode() + usage.encode()):012d}"
    rate = billing_v1.PricingExpression.TierRate(
        start_usage_amount=0,
        unit_price=money_pb2.Money(
            currency_code="USD", units=units, nanos=round((usd - units) * 1e9)
        ),
    )
    return billing_v1.Sku(
        name=f"services/{COMPUTE_SERVICE}/skus/{sku_id}",
        sku_id=sku_id,
        description=description,
        category=billing_v1.Category(
            service_display_name="Compute Engine",
            resource_family="Compute",
            resource_group="TPU",
            usage_type=usage,
        ),
        service_regions=[region],
        pricing_info=[
            billing_v1.PricingInfo(
                summary="",
                pricing_expression=billing_v1.PricingExpression(
                    usage_unit="h",
                    usage_unit_description="hour",
                    base_unit="s",
                    base_unit_conversion_factor=3600,
                    display_quantity=1,
                    tiered_rates=[rate],
                ),
                currency_conversion_rate=1,
            )
        ],
        service_provider_name="Google",
    )


class BillingCatalogEmulator:
    """Started on construction with the SKUs of Compute Engine's service; `stop()` ends it;
    `requests` records each request's path and query."""

    def __init__(self, skus: list[Any], page_size: int = DEFAULT_PAGE_SIZE) -> None:
        self.skus, self.page_size = list(skus), page_size
        self.requests: list[tuple[str, dict[str, list[str]]]] = []
        emulator = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                split = urlsplit(self.path)
                query = parse_qs(split.query)
                emulator.requests.append((split.path, query))
                key = (query.get("key") or [""])[0] or self.headers.get("x-goog-api-key", "")
                status, _, payload = emulator.answer(split.path, query, key)
                send_json(self, status, payload)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd, self.url = serve_on_loopback(Handler)

    def endpoints(self) -> dict[str, str]:
        """TPU_RL_API_ENDPOINTS: the Cloud Billing API's host at this server."""
        return {HOST: self.url}

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(self, path: str, query: dict[str, list[str]], key: str) -> tuple[int, dict, Any]:
        """services.skus.list's answer: one page of the service's SKUs, or Google's error."""
        from google.cloud import billing_v1

        if key != API_KEY:
            return google_error(403, "The request is missing a valid API key.", "forbidden")
        if path != f"/v1/services/{COMPUTE_SERVICE}/skus":
            return google_error(404, f"Service not found: {path}", "notFound")
        size = int((query.get("pageSize") or [self.page_size])[0]) or self.page_size
        start = int((query.get("pageToken") or ["0"])[0] or 0)
        page = self.skus[start : start + min(size, self.page_size)]
        following = start + len(page)
        response = billing_v1.ListSkusResponse(
            skus=page, next_page_token=str(following) if following < len(self.skus) else ""
        )
        return 200, {}, json.loads(billing_v1.ListSkusResponse.to_json(response))
