"""How every raybus process connects to NATS and Redis: with its own user, a password read from a
mounted file (never from an env value, never logged) and TLS against the install's CA when one is
configured. Without those settings it connects as before (a bare dev server)."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import nats
import redis.asyncio as aioredis
from nats.aio.client import Client as NATS
from pydantic import BaseModel, ConfigDict

from raybus.bus.permissions import inbox_prefix


class BusAuth(BaseModel):
    """Credentials by reference: paths to files a Secret mounts (or `raybus up` writes)."""

    model_config = ConfigDict(frozen=True)
    nats_user: str | None = None
    nats_password_file: str | None = None
    nats_ca_file: str | None = None
    redis_user: str | None = None
    redis_password_file: str | None = None
    redis_ca_file: str | None = None

    def __repr__(self) -> str:  # paths only; still keep it short in logs
        return f"BusAuth(nats_user={self.nats_user!r}, tls={bool(self.nats_ca_file)})"


def _secret(path: str | None) -> str | None:
    return Path(path).read_text().strip() if path else None


def nats_servers(url: str) -> list[str]:
    """RAYBUS_NATS_URL may name every server of a NATS cluster, comma-separated: the client then
    connects to any of them and, when that one goes, reconnects to another (nats-py's server pool)."""
    return [part.strip() for part in url.split(",") if part.strip()]


def nats_options(url: str, auth: BusAuth) -> dict[str, Any]:
    opts: dict[str, Any] = {"servers": nats_servers(url)}
    if auth.nats_user:
        opts["user"] = auth.nats_user
        opts["password"] = _secret(auth.nats_password_file)
        # Replies and push deliveries under this role's own prefix, the only inbox it may read.
        opts["inbox_prefix"] = inbox_prefix(auth.nats_user)
    if auth.nats_ca_file:
        ctx = ssl.create_default_context(cafile=auth.nats_ca_file)
        opts["tls"] = ctx
        # The cert names the server by its install names and 127.0.0.1; the URL's host is what we
        # verify against (nats-py uses it unless told otherwise).
    return opts


async def connect_nats(url: str, auth: BusAuth, **kwargs: Any) -> NATS:
    return await nats.connect(**nats_options(url, auth), **kwargs)


def redis_client(url: str, auth: BusAuth, **kwargs: Any) -> aioredis.Redis:
    if auth.redis_user:
        kwargs["username"] = auth.redis_user
        kwargs["password"] = _secret(auth.redis_password_file)
    if auth.redis_ca_file:
        kwargs["ssl_ca_certs"] = auth.redis_ca_file
    return aioredis.from_url(url, **kwargs)
