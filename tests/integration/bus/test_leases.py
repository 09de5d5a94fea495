"""Partition leases on a real nats-server: a member count the server refuses to give does not
stop a replica from holding its leases (a restarted reconciler exited on it in the chaos soak)."""

from __future__ import annotations

import contextlib

import nats
from nats.js.api import KeyValueConfig

from raybus.bus import subjects as s
from raybus.runtime.leases import PartitionLeases
from raybus.testing.servers import NatsServer


async def test_a_refused_member_count_keeps_the_last_one_and_the_leases(nats_server: NatsServer) -> None:
    nc = await nats.connect(nats_server.url)
    try:
        js = nc.jetstream()
        kv = await js.create_key_value(KeyValueConfig(bucket=s.KV_LEASES, ttl=10, history=1))
        leases = PartitionLeases(kv, controller=s.Controller("cluster"), replica_id="r0", partitions=4, ttl_s=10)
        first = await leases.tick()
        assert first.acquired == {0, 1, 2, 3} and leases._members_seen == 1
        # The KV's stream accepts no more consumers: keys() (an ephemeral consumer) is refused
        # with "maximum consumers limit reached", as after a burst of SIGKILLed clients.
        info = await js.stream_info(f"KV_{s.KV_LEASES}")
        config = info.config
        config.max_consumers = 1
        await js.update_stream(config)
        with contextlib.suppress(nats.js.errors.BadRequestError):  # the first tick's may still hold it
            await js.subscribe(f"$KV.{s.KV_LEASES}.>", stream=f"KV_{s.KV_LEASES}")  # takes the only slot
        try:
            await kv.keys()
            raise AssertionError("the server was expected to refuse another consumer")
        except nats.js.errors.APIError:
            pass
        again = await leases.tick()
        assert again.lost == set() and sorted(leases.held) == [0, 1, 2, 3]
        assert all(leases.valid(p) for p in range(4))
    finally:
        await nc.close()
