"""`raybus tap --count N --timeout S` in scripts: prints readable rows, exits by count/timeout."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import nats

from raybus.bus.streams import ensure_streams
from raybus_sim.testing.servers import NatsServer
from tests.integration.bus.helpers import publish_version


async def test_tap_prints_rows_and_stops_after_count(nats_server: NatsServer) -> None:
    nc = await nats.connect(nats_server.url)
    await ensure_streams(nc.jetstream())
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "raybus.cli", "tap", "obj", "--json", "--count", "2", "--timeout", "20",
        "--nats-url", nats_server.url, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    line = await asyncio.wait_for(proc.stderr.readline(), 30)  # subscribed: publish now
    assert line.startswith(b"tap: listening on raybus.obj.>")
    for version in (1, 2):
        await publish_version(nc.jetstream(), name="tapped", version=version, partitions=16)
    out, _ = await asyncio.wait_for(proc.communicate(), 30)
    rows = [json.loads(line) for line in out.decode().splitlines()]
    assert proc.returncode == 0 and len(rows) == 2  # triggers were filtered out by "obj"
    assert rows[0]["subject"] == "raybus.obj.raycluster._.default.tapped"
    assert rows[0]["key"] == "default/tapped" and rows[1]["summary"].startswith("MODIFIED rv=2")
    await nc.close()


async def test_tap_times_out_with_failure_when_count_not_reached(nats_server: NatsServer) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "raybus.cli", "tap", "cmd", "--count", "1", "--timeout", "1",
        "--nats-url", nats_server.url, stderr=subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1 and b"saw 0 of 1" in err


async def test_tap_exits_with_a_clear_line_when_nats_goes_away(nats_server: NatsServer) -> None:
    """A tap whose server stops mid-way says so and exits 1 (it waited forever, with tracebacks)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "raybus.cli", "tap", "--nats-url", nats_server.url,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    line = await asyncio.wait_for(proc.stderr.readline(), 30)
    assert line.startswith(b"tap: listening on raybus.>")
    nats_server.stop()
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 1
    assert err.decode().splitlines() == [f"raybus tap: lost NATS at {nats_server.url} after 0 messages"]
