"""Redis-held controller state that KubeRay keeps in process memory and loses on restart:
scale expectations, deletion timestamps, the serve-config cache.

Values are JSON documents under `raybus:<area>:<namespace>/<name>`; each area is owned by one
controller, and only the replica holding the object's partition lease writes it, so plain
GET/SET is enough (no cross-replica races to arbitrate here).
"""

from __future__ import annotations

import json
from typing import Any

import redis.asyncio as aioredis

from raybus.observability.tracing import redis_span

EXPECTATIONS = "expectations"
DELETION_TIMESTAMPS = "deletion-ts"
SERVE_CONFIG = "serve-config"


def _key(area: str, namespace: str, name: str) -> str:
    return f"raybus:{area}:{namespace}/{name}"


class StateStore:
    def __init__(self, client: aioredis.Redis) -> None:
        self._r = client

    @classmethod
    def from_url(cls, url: str) -> StateStore:
        return cls(aioredis.from_url(url))

    async def load(self, area: str, *, namespace: str, name: str) -> dict[str, Any] | None:
        key = _key(area, namespace, name)
        with redis_span("GET", key):
            raw = await self._r.get(key)
        if raw is None:
            return None
        value = json.loads(raw)
        return value if isinstance(value, dict) else None

    async def save(self, area: str, *, namespace: str, name: str, value: dict[str, Any]) -> None:
        key = _key(area, namespace, name)
        with redis_span("SET", key):
            await self._r.set(key, json.dumps(value, sort_keys=True))

    async def expire(self, area: str, *, namespace: str, name: str, seconds: int) -> None:
        """Keep the value `seconds` longer, then drop it (nothing happens when there is none)."""
        key = _key(area, namespace, name)
        with redis_span("EXPIRE", key):
            await self._r.expire(key, seconds)

    async def delete(self, area: str, *, namespace: str, name: str) -> None:
        key = _key(area, namespace, name)
        with redis_span("DEL", key):
            await self._r.delete(key)

    async def close(self) -> None:
        await self._r.aclose()
