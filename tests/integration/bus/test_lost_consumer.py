"""A pull consumer that disappears under its workers (deleted by an operator, lost with a server's
storage) is created again by them: a pull from a deleted consumer fails with 503 for ever, and no
other role may create it (bus/permissions.py)."""

from __future__ import annotations

import nats
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig

from raybus.runtime.pull import PullWorkers
from raybus_sim.testing.servers import NatsServer
from tests.security.kit import until


async def test_pull_workers_create_their_lost_consumer_again(nats_server: NatsServer) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await js.add_stream(name="LOST", subjects=["lost.>"])
    handled: list[bytes] = []

    async def handle(msg: Msg) -> None:
        handled.append(msg.data)
        await msg.ack()

    workers = PullWorkers(nc, stream="LOST", config=ConsumerConfig(durable_name="worker", ack_policy=AckPolicy.EXPLICIT,
                                                                    ack_wait=2.0),
                          handler=handle, concurrency=2, name="lost")
    await workers.start()
    try:
        await js.publish("lost.a", b"before")
        await until(lambda: _has(handled, b"before"), timeout=15, what="the first message handled")
        await js.delete_consumer("LOST", "worker")
        await js.publish("lost.b", b"after")
        await until(lambda: _has(handled, b"after"), timeout=30, what="a message after the consumer was lost")
        assert (await js.consumer_info("LOST", "worker")).config.durable_name == "worker"
    finally:
        await workers.stop()
        await nc.close()


async def _has(handled: list[bytes], data: bytes) -> bool:
    return data in handled
