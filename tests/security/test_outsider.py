"""The bus against outsiders: on a real nats-server and redis-server configured from
bus/security.py, a client without credentials or TLS gets nothing, and each role can do only what
its service does (the insider's attacks on a whole stack: test_insider.py)."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
import redis.asyncio as aioredis
from nats.errors import Error as NatsError
from redis.exceptions import AuthenticationError, NoPermissionError, ResponseError

from raybus.bus import security
from raybus.bus import subjects as s
from raybus.bus.ledger import BatchLedger, command_key
from raybus.bus.permissions import Role
from raybus.bus.streams import BusSettings, command_consumer_config
from raybus.observability import busstate
from raybus_sim.devstack.stack import declare_bus
from raybus_sim.testing.servers import NatsServer, RedisServer, start_nats, start_redis
from tests.security.kit import clients

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return security.generate(tmp_path_factory.mktemp("bus") / "secrets")


@pytest.fixture(scope="module")
def bus(secrets: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    server = start_nats(tmp_path_factory.mktemp("nats"), secrets=secrets)
    declare_bus(server.options(Role.BUS_ADMIN.value))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def redis_server(secrets: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = start_redis(tmp_path_factory.mktemp("redis"), secrets=secrets)
    yield server
    server.stop()


@pytest.fixture
async def as_role(bus: NatsServer) -> AsyncIterator[Any]:
    async with clients(bus) as make:
        yield make


async def test_a_client_without_credentials_is_refused(bus: NatsServer, secrets: Path) -> None:
    tls = ssl.create_default_context(cafile=str(secrets / "ca.pem"))
    with pytest.raises((NatsError, OSError, asyncio.TimeoutError)):
        await nats.connect(bus.url, tls=tls, allow_reconnect=False, max_reconnect_attempts=0,
                           connect_timeout=3)
    with pytest.raises((NatsError, OSError, asyncio.TimeoutError)):  # right user, wrong password
        await nats.connect(bus.url, tls=tls, user="command-executor", password="guess",
                           allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=3)


async def test_plain_text_is_refused(bus: NatsServer) -> None:
    """TLS is required: a client that does not speak it never gets to authenticate."""
    with pytest.raises((NatsError, OSError, asyncio.TimeoutError, ssl.SSLError)):
        await nats.connect(bus.url.replace("tls://", "nats://"), user="watcher", password="x",
                           allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=3)


async def test_the_watcher_cannot_publish_a_command(as_role: Any) -> None:
    watcher = await as_role("watcher")
    subject = s.command_subject("cluster", "default", "victim")
    await watcher.nc.publish(subject, b'{"forged": true}')
    await watcher.nc.flush()
    assert await watcher.denied(subject)
    # ...and nothing reached the command stream.
    admin = await as_role("bus-admin")
    info = await admin.nc.jetstream().stream_info(s.STREAM_COMMANDS)
    assert info.state.messages == 0


async def test_the_watcher_cannot_read_the_ledger_or_revoke_a_batch(as_role: Any) -> None:
    admin = await as_role("bus-admin")
    ledger = await BatchLedger.open(admin.nc.jetstream())
    claim = await ledger.claim(command_key("batch-1"), controller="cluster", digest="d", holder="executor-0",
                               lease_s=30, now=0.0)
    assert claim.won
    watcher = await as_role("watcher")
    js = watcher.nc.jetstream(timeout=2)
    with pytest.raises((NatsError, asyncio.TimeoutError)):  # the read is refused: no answer comes back
        kv = await js.key_value(s.KV_BATCHES)
        await kv.get(command_key("batch-1"))
    assert await watcher.denied(f"$JS.API.DIRECT.GET.KV_{s.KV_BATCHES}") or await watcher.denied(
        f"$JS.API.STREAM.MSG.GET.KV_{s.KV_BATCHES}")
    await watcher.nc.publish(f"$KV.{s.KV_BATCHES}.cmd.batch-2", b'{"state": "revoked"}')
    await watcher.nc.flush()
    assert await watcher.denied(f"$KV.{s.KV_BATCHES}.cmd.batch-2")
    record, _ = await ledger.get(command_key("batch-2"))
    assert record is None


async def test_a_reconciler_may_only_command_for_its_own_controller(as_role: Any) -> None:
    jobs = await as_role("job-reconciler")
    await jobs.nc.jetstream().publish(s.command_subject("job", "default", "mine"), b"{}")  # allowed
    await jobs.nc.publish(s.command_subject("cluster", "default", "theirs"), b"{}")
    await jobs.nc.flush()
    assert await jobs.denied(s.command_subject("cluster", "default", "theirs"))


async def test_nobody_but_bus_admin_may_change_a_stream(as_role: Any) -> None:
    """A stream's republish/sources settings would route messages past subject permissions."""
    for role in ("watcher", "cluster-reconciler", "command-executor", "dashboard-poller"):
        c = await as_role(role)
        js = c.nc.jetstream(timeout=1)
        info = await js.stream_info(s.STREAM_OBJECTS)  # reading its info is allowed
        with pytest.raises((NatsError, asyncio.TimeoutError)):  # refused: no answer comes back
            await js.update_stream(info.config)
        assert await c.denied(f"$JS.API.STREAM.UPDATE.{s.STREAM_OBJECTS}")


async def test_tap_reads_everything_and_publishes_nothing(as_role: Any, bus: NatsServer) -> None:
    tap = await as_role("tap")
    got: asyncio.Queue[str] = asyncio.Queue()

    async def on_msg(msg: Any) -> None:
        await got.put(msg.subject)
    await tap.nc.subscribe(s.everything_filter(), cb=on_msg)
    await tap.nc.flush()
    watcher = await as_role("watcher")
    subject = s.object_subject("pod", "default", "p1")
    await watcher.nc.jetstream().publish(subject, b"{}")
    assert await asyncio.wait_for(got.get(), 5) == subject
    await tap.nc.publish(s.trigger_subject("cluster", namespace="default", name="x"), b"{}")
    await tap.nc.flush()
    assert await tap.denied("raybus.trigger")


async def test_redis_users_see_only_their_own_keys(redis_server: RedisServer, secrets: Path) -> None:
    admin = redis_server.client()
    await admin.set("raybus:serve-config:default/svc", "{}")
    url = redis_server.url
    anonymous = aioredis.from_url(url)
    with pytest.raises((AuthenticationError, ResponseError)):
        await anonymous.get("raybus:serve-config:default/svc")
    cluster = aioredis.from_url(url, username="cluster-reconciler",
                                password=security.password(secrets, "redis-cluster-reconciler"))
    await cluster.set("raybus:expectations:default/rc", "{}")  # its own area
    with pytest.raises(NoPermissionError):
        await cluster.get("raybus:serve-config:default/svc")
    with pytest.raises(NoPermissionError):
        await cluster.flushall()
    service = aioredis.from_url(url, username="service-reconciler",
                                password=security.password(secrets, "redis-service-reconciler"))
    assert await service.get("raybus:serve-config:default/svc") == b"{}"
    for c in (admin, anonymous, cluster, service):
        await c.aclose()


async def test_the_watchers_bus_state_reads_consumers_and_touches_none(as_role: Any) -> None:
    """The watcher's /metrics reads every work queue's consumers (CONSUMER.LIST) with its own
    user; that read grants no pull, delete or create on another service's consumer."""
    admin = await as_role("bus-admin")
    await admin.nc.jetstream().add_consumer(s.STREAM_COMMANDS, command_consumer_config(BusSettings()))
    await admin.nc.jetstream().publish(s.command_subject("cluster", "default", "c"), b"{}")
    watcher = await as_role("watcher")
    state = busstate.BusState(watcher.nc, timeout_s=2)
    samples = await state.read()
    pending = [v for name, labels, v in samples if name == "raybus_consumer_pending_messages"
               and labels == [s.STREAM_COMMANDS, "command-executor"]]
    held = [v for name, labels, v in samples if (name, labels) == ("raybus_stream_messages", [s.STREAM_COMMANDS])]
    assert len(pending) == 1 and pending == held and held[0] >= 1  # nothing consumed: all pending
    js = watcher.nc.jetstream(timeout=1)
    with pytest.raises((NatsError, TimeoutError)):  # refused: no answer comes back
        await js.delete_consumer(s.STREAM_COMMANDS, "command-executor")
    assert await watcher.denied(f"$JS.API.CONSUMER.DELETE.{s.STREAM_COMMANDS}.command-executor")
    await watcher.nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.{s.STREAM_COMMANDS}.command-executor", b"1")
    await watcher.nc.flush()
    assert await watcher.denied(f"$JS.API.CONSUMER.MSG.NEXT.{s.STREAM_COMMANDS}")
    info = await admin.nc.jetstream().consumer_info(s.STREAM_COMMANDS, "command-executor")
    assert (info.num_pending, info.num_ack_pending) == (pending[0], 0)  # nothing was taken
async def test_the_server_configs_hold_no_password(bus: NatsServer, redis_server: RedisServer,
                                                   secrets: Path) -> None:
    """Who reads nats-auth.conf or redis-users.acl (a server's mount, a backup) learns no password:
    NATS holds bcrypt hashes and Redis SHA-256 ones, and both servers still let each role in with its
    password, and no one in with a hash."""
    configs = (secrets / "nats-auth.conf").read_text() + (secrets / "redis-users.acl").read_text()
    passwords = {p.name: p.read_text().strip() for p in (secrets / "users").iterdir()}
    assert len(passwords) >= 10
    for name, password in passwords.items():
        assert password not in configs, name
    hashed = {u.split()[1]: u.split()[3] for u in (secrets / "redis-users.acl").read_text().splitlines()
              if u.startswith("user ") and " on #" in u}
    for role in security.REDIS_KEYS:
        client = aioredis.Redis(port=redis_server.port, username=role, password=passwords[f"redis-{role}"])
        assert await client.ping()
        await client.aclose()
        with pytest.raises(AuthenticationError):
            await aioredis.Redis(port=redis_server.port, username=role, password=hashed[role][1:]).ping()
    nc = await nats.connect(**bus.options(Role.WATCHER.value), allow_reconnect=False)
    await nc.close()
    nats_hash = next(u["password"] for u in json.loads(
        (secrets / "nats-auth.conf").read_text().split("authorization: ", 1)[1])["users"] if u["user"] == "watcher")
    assert nats_hash.startswith("$2a$")
    with pytest.raises((NatsError, OSError, asyncio.TimeoutError)):
        await nats.connect(**{**bus.options(Role.WATCHER.value), "password": nats_hash},
                           allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=3)
