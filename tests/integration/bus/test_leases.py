"""Partition leases on a real nats-server: the member count is read without a consumer, and one
the server cannot give does not stop a replica from holding its leases (a restarted reconciler
exited on it in the chaos soak)."""

from __future__ import annotations

import contextlib

import nats
from nats.js.api import KeyValueConfig

from raybus.bus import subjects as s
from raybus.runtime.leases import PartitionLeases
from raybus_sim.testing.servers import NatsServer


async def test_the_member_count_needs_no_consumer_and_a_refused_one_keeps_the_leases(
        nats_server: NatsServer) -> None:
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        kv = await js.create_key_value(KeyValueConfig(bucket=s.KV_LEASES, ttl=10, history=1))
        cluster = s.Controller("cluster")
        leases = PartitionLeases(kv, js, controller=cluster, replica_id="r0", partitions=4, ttl_s=10)
        first = await leases.tick()
        assert first.acquired == {0, 1, 2, 3} and leases._members_seen == 1
        # The KV's stream accepts no more consumers, as after a burst of SIGKILLed clients
        # ("maximum consumers limit reached"): kv.keys(), an ephemeral consumer, is refused.
        info = await js.stream_info(f"KV_{s.KV_LEASES}")
        config = info.config
        config.max_consumers = 1
        await js.update_stream(config)
        with contextlib.suppress(nats.js.errors.BadRequestError):
            await js.subscribe(f"$KV.{s.KV_LEASES}.>", stream=f"KV_{s.KV_LEASES}")  # takes the only slot
        try:
            await kv.keys()
            raise AssertionError("the server was expected to refuse another consumer")
        except nats.js.errors.APIError:
            pass
        # A second replica of this controller and one of another: the count still sees the first
        # (it reads the stream's subjects), and the fair share halves.
        await kv.put(s.member_key(cluster, "r1"), b"r1")
        await kv.put(s.member_key(s.Controller("job"), "j0"), b"j0")
        again = await leases.tick()
        assert leases._members_seen == 2
        assert len(leases.held) == 2 and again.lost == {0, 1, 2, 3} - set(leases.held)  # handed back
        assert all(leases.valid(p) for p in leases.held)
        # The stream itself unreachable: the last count stands, the leases too.
        await js.delete_stream(f"KV_{s.KV_LEASES}")
        with contextlib.suppress(Exception):
            await leases.tick()
        assert leases._members_seen == 2
    finally:
        await nc.close()
