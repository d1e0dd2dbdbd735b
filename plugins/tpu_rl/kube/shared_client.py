"""One Kubernetes API client per cluster and credentials for every reward wait of a process.

The provider hook's `get_conn` makes a new kubernetes_asyncio client each time: a
`Configuration` (whose logger levels clear every logger's cache in the process), a Google
token, an SSL context and a TLS handshake. A triggerer runs many waits in one event loop
(Airflow's jobs/triggerer_job_runner.py, TriggerRunner): here they lease one client, whose
aiohttp pool keeps its connections alive between requests, instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

# A client's token is renewed this often: Google access tokens last 3600 s, and the
# provider's own token renews at half that (airflow/providers/google/common/hooks/
# base_google.py, _CredentialsToken.ensure_token: `delta <= access_token_duration / 2`).
RENEW_S = 1800.0
# Open streams (followed logs) per client: its aiohttp pool holds at most
# `connection_pool_maxsize` connections, 100 by default (kubernetes_asyncio/client/
# configuration.py and rest.py, RESTClientObject: `TCPConnector(limit=maxsize)`); the rest
# are for the short requests.
STREAMS_PER_CLIENT = 50


@dataclass(eq=False)
class _Leased:
    client: Any  # kubernetes_asyncio ApiClient
    closing: contextlib.AsyncExitStack
    born: float
    leases: int = 0
    streams: int = 0


@dataclass(eq=False)
class SharedClients:
    """The clients of one cluster and credentials in this event loop, each closed once the
    last lease of it ends (or it is renewed and no lease holds it)."""

    connect: Callable[[], Any]  # the provider hook's get_conn
    _clients: list[_Leased] = field(default_factory=list)
    _opening: asyncio.Lock = field(default_factory=asyncio.Lock)

    @contextlib.asynccontextmanager
    async def lease(self, *, stream: bool = False) -> AsyncIterator[Any]:
        """A client for the block; `stream`: for a response left open (a followed log)."""
        leased = await self._usable(stream)
        leased.leases += 1
        leased.streams += stream
        try:
            yield leased.client
        finally:
            leased.leases -= 1
            leased.streams -= stream
            if not leased.leases:
                await self._close(leased)

    def renew(self) -> None:
        """The API refused the token (401): the next lease gets a new client and token."""
        self._clients.clear()

    async def _usable(self, stream: bool) -> _Leased:
        async with self._opening:
            now = asyncio.get_running_loop().time()
            self._clients = [c for c in self._clients if now - c.born < RENEW_S]
            for leased in self._clients:
                if not stream or leased.streams < STREAMS_PER_CLIENT:
                    return leased
            closing = contextlib.AsyncExitStack()
            client = await closing.enter_async_context(self.connect())
            self._clients.append(_Leased(client, closing, now))
            return self._clients[-1]

    async def _close(self, leased: _Leased) -> None:
        """Close a client no lease holds: none is left open when the process's waits end."""
        if leased in self._clients:
            self._clients.remove(leased)
        await leased.closing.aclose()


# Per event loop (a test runs several), per connection (the cluster and the credentials).
_SHARED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Hashable, SharedClients]] = (
    weakref.WeakKeyDictionary()
)


def connection_key(*who: Any) -> Hashable:
    """A key for who connects (the cluster, the credentials): a list, such as an
    impersonation chain, as a tuple."""
    return tuple(tuple(part) if isinstance(part, list) else part for part in who)


def shared_clients(connection: Hashable, connect: Callable[[], Any]) -> SharedClients:
    """This event loop's clients for `connection`, made with `connect` when first needed."""
    clients = _SHARED.setdefault(asyncio.get_running_loop(), {})
    if connection not in clients:
        clients[connection] = SharedClients(connect)
    return clients[connection]
