"""Connections as one bus role that record what the server refused, for the red-team tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import nats

from raybus_sim.testing.servers import NatsCluster, NatsServer


class Client:
    """A connection as one role that records the server's permission errors."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.errors: list[str] = []
        self.nc: Any = None

    async def connect(self, server: NatsServer | NatsCluster) -> Client:
        async def on_error(e: Exception) -> None:
            self.errors.append(str(e))
        self.nc = await nats.connect(**server.options(self.role), error_cb=on_error, allow_reconnect=False)
        return self

    async def denied(self, what: str, *, timeout: float = 5.0) -> bool:
        """The server refused something naming `what` (a publish or subscribe violation)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            if any("permissions violation" in e.lower() and what.lower() in e.lower() for e in self.errors):
                return True
            await asyncio.sleep(0.05)
        return False

    async def publish_denied(self, subject: str, body: bytes = b"{}") -> bool:
        await self.nc.publish(subject, body)
        await self.nc.flush()
        return await self.denied(subject)

    async def subscribe_denied(self, subject: str) -> bool:
        await self.nc.subscribe(subject)
        await self.nc.flush()
        return await self.denied(subject)


Connect = Callable[[str], Awaitable[Client]]


@contextlib.asynccontextmanager
async def clients(server: NatsServer | NatsCluster) -> AsyncIterator[Connect]:
    made: list[Client] = []

    async def make(role: str) -> Client:
        c = await Client(role).connect(server)
        made.append(c)
        return c
    try:
        yield make
    finally:
        for c in made:
            with contextlib.suppress(Exception):
                await c.nc.close()


async def until(check: Callable[[], Awaitable[Any]], *, timeout: float = 30.0, what: str = "") -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
