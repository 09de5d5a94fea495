"""Declare every stream and KV bucket, as `bus-admin`: what `raybus bus-init`, the install's Job
`raybus-bus-init` and `raybus up` do before services start on a secured bus (services there may
only wait for them, bus/permissions.py)."""

from __future__ import annotations

from typing import Any

import nats

from raybus.bus.ledger import BatchLedger
from raybus.bus.streams import BusSettings, ensure_leases, ensure_streams


async def declare_bus(options: dict[str, Any], settings: BusSettings | None = None) -> None:
    nc = await nats.connect(**options)
    try:
        js = nc.jetstream()
        await ensure_streams(js, settings)
        await ensure_leases(js, settings)
        await BatchLedger.open(js, replicas=(settings or BusSettings()).replicas)
    finally:
        await nc.close()
