"""The event loop's shared API clients (tpu_rl.kube.shared_client): one client leased by
every wait that connects as another, a new one after a 401, at half a token's life, or when
a client has as many open streams as its pool allows; none left open once no lease holds it."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator

import pytest

from tpu_rl.kube import shared_client
from tpu_rl.kube.shared_client import connection_key, shared_clients

pytestmark = pytest.mark.asyncio


class Connections:
    """A stand-in for the hook's get_conn: numbered clients, and which are still open."""

    def __init__(self) -> None:
        self.numbers = itertools.count(1)
        self.open: set[int] = set()
        self.made = 0

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[int]:
        client = next(self.numbers)
        self.made += 1
        self.open.add(client)
        try:
            yield client
        finally:
            self.open.discard(client)


async def test_waits_lease_one_client_closed_when_the_last_lease_ends():
    conns = Connections()
    clients = shared_clients(connection_key("https://c", "ca", False, "conn", None), conns.connect)
    async with clients.lease(stream=True) as streaming:
        async with clients.lease() as polling, clients.lease() as saving:
            assert streaming == polling == saving == 1
        assert conns.open == {1}
    assert conns.open == set() and conns.made == 1


async def test_a_401_renews_the_client_the_old_one_closing_with_its_last_lease():
    conns = Connections()
    clients = shared_clients("cluster", conns.connect)
    async with clients.lease(stream=True) as old:
        clients.renew()
        async with clients.lease() as new:
            assert (old, new) == (1, 2)
        assert conns.open == {1}  # the stream on the old token goes on
    assert conns.open == set()


async def test_a_client_is_renewed_at_half_a_tokens_life(monkeypatch):
    conns = Connections()
    clients = shared_clients("cluster", conns.connect)
    async with clients.lease(stream=True) as first:
        monkeypatch.setattr(shared_client, "RENEW_S", 0.0)
        async with clients.lease() as second:
            assert (first, second) == (1, 2)


async def test_streams_beyond_a_clients_pool_get_another_client(monkeypatch):
    monkeypatch.setattr(shared_client, "STREAMS_PER_CLIENT", 2)
    conns = Connections()
    clients = shared_clients("cluster", conns.connect)
    async with contextlib.AsyncExitStack() as leases:
        got = [await leases.enter_async_context(clients.lease(stream=True)) for _ in range(3)]
        polling = await leases.enter_async_context(clients.lease())
        assert got == [1, 1, 2] and polling == 1
    assert conns.open == set()


async def test_other_clusters_or_credentials_get_clients_of_their_own():
    conns = Connections()
    one = shared_clients(connection_key("https://c", "ca", False, "a", ["sa@p"]), conns.connect)
    same = shared_clients(connection_key("https://c", "ca", False, "a", ["sa@p"]), conns.connect)
    other = shared_clients(connection_key("https://c", "ca", False, "b", ["sa@p"]), conns.connect)
    assert one is same and one is not other
    async with one.lease() as a, other.lease() as b:
        assert a != b
