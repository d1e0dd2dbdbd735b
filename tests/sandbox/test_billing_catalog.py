"""`make prices` (tools/prices.py) against the sandbox's Cloud Billing Catalog API
(sandbox/billing_catalog.py): it reads every page of Compute Engine's SKUs with
google-cloud-billing's client, writes the table's billing-catalogue rows, says what changed,
and leaves the other sources' rows as they were."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.billing_catalog import API_KEY, BillingCatalogEmulator, tpu_sku
from tests.conftest import REPO
from tools import prices as refresh

TABLE = REPO / "plugins" / "tpu_rl" / "prices.py"


@pytest.fixture
def billing(monkeypatch: pytest.MonkeyPatch) -> Iterator[BillingCatalogEmulator]:
    skus = [
        tpu_sku("TpuV5p", "us-east5", 4.2),
        tpu_sku("TpuV5p", "us-east5", 1.62, spot=True),
        tpu_sku("TpuV5p", "us-east5", 2.94, usage="Commit1Yr"),
        tpu_sku("TpuV6e", "us-east5", 2.7),
        tpu_sku("TpuV6e DWS", "us-east5", 1.5),  # flex-start's: not a price the table takes
        tpu_sku("N2 Instance Core", "us-east5", 0.03),  # not a TPU
    ]
    emulator = BillingCatalogEmulator(skus, page_size=2)
    monkeypatch.setenv("TPU_RL_API_ENDPOINTS", json.dumps(emulator.endpoints()))
    monkeypatch.setenv(refresh.API_KEY_ENV, API_KEY)
    yield emulator
    emulator.stop()


def load(path: Path):
    """The price module written at `path`, imported on its own."""
    spec = importlib.util.spec_from_file_location("refreshed_prices", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up while it is made
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_make_prices_writes_the_apis_rows_and_says_what_changed(billing, tmp_path, capsys):
    table = tmp_path / "prices.py"
    shutil.copy(TABLE, table)
    assert refresh.main([str(table)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "added: v5p us-east5 spot 1.62 (the API's)" in out
    assert "added: v5p us-east5 commit_1y 2.94 (the API's)" in out
    assert "quoted price: v5p us-east5 commit_1y none -> 2.94" in out
    assert not [line for line in out if "quoted price: v5p us-east5 spot" in line]  # 1.68 stays
    assert len([p for p, _ in billing.requests]) == 3  # every page of the 6 SKUs, 2 a page
    written = load(table)
    spot = written.listed("v5p-64", "us-east5", written.SPOT)
    assert (spot.low, spot.usd_per_chip_hour) == (1.5601, 1.68)  # the mirrors' rows stay
    assert "the Cloud Billing Catalog API (make prices 1.62)" in spot.source
    commitment = written.capacity_price("v5p-64", "us-east5", "reservation")
    assert (commitment.usd_per_chip_hour, commitment.basis) == (2.94, written.LIST_PRICE)
    assert not [r for r in written.CATALOGUE_ROWS if r[2] == "flex_start"]
    ruff = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", str(table)], capture_output=True
    )
    assert ruff.returncode == 0, ruff.stdout  # the block is written as ruff formats it

    # a later refresh: the API's figure moved, so does the quoted price; --check says so
    billing.skus[1] = tpu_sku("TpuV5p", "us-east5", 1.75, spot=True)
    assert refresh.main(["--check", str(table)]) == 1
    assert "changed: v5p us-east5 spot 1.62 -> 1.75 (the API's)" in capsys.readouterr().out
    assert load(table).listed("v5p-64", "us-east5", "spot").usd_per_chip_hour == 1.68
    assert refresh.main([str(table)]) == 0
    out = capsys.readouterr().out
    assert "quoted price: v5p us-east5 spot 1.68 -> 1.75" in out
    assert refresh.main(["--check", str(table)]) == 0
    assert capsys.readouterr().out.startswith("no price changed")


def test_a_request_without_the_api_key_is_refused_as_google_refuses_it(
    billing, tmp_path, monkeypatch
):
    from google.api_core.exceptions import Forbidden

    table = tmp_path / "prices.py"
    shutil.copy(TABLE, table)
    monkeypatch.setenv(refresh.API_KEY_ENV, "another-key")
    with pytest.raises(Forbidden, match="missing a valid API key"):
        refresh.main([str(table)])
    assert table.read_text() == TABLE.read_text()
