"""The kustomize base's NATS configuration (deploy/kustomize/base/nats.conf) on three real
nats-server processes, as the StatefulSet runs it (only addresses and paths moved to loopback):
the three servers form one JetStream cluster, NATS's probe endpoints answer, and with
RAYBUS_STREAM_REPLICAS=3 every raybus stream and KV bucket is kept on all three, so writes still
succeed with one server gone."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import nats
import pytest
from nats.errors import NoRespondersError
from nats.js.errors import NoStreamResponseError

from raybus.bus import security
from raybus.bus import subjects as s
from raybus.bus.ledger import BatchLedger
from raybus.bus.streams import BusSettings, ensure_leases, ensure_streams, stream_configs
from raybus.observability.busstate import BusState
from raybus_sim.testing.servers import _binary, die_with_parent, free_ports

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[3]
CONF = REPO / "deploy" / "kustomize" / "base" / "nats.conf"
DEADLINE_S = 60.0
T = TypeVar("T")


def until(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not cond():
        assert time.monotonic() < deadline, f"not within {DEADLINE_S}s: {what}"
        time.sleep(0.1)


def http_status(url: str) -> int:
    try:
        return int(urllib.request.urlopen(url, timeout=2).status)
    except urllib.error.HTTPError as err:
        return err.code
    except OSError:
        return 0


def local_conf(text: str, i: int, client: int, monitor: int, routes: list[int], home: Path) -> str:
    """The StatefulSet's config for nats-<i>, with each address and path it names moved here."""
    moves = {"listen: 0.0.0.0:4222": f"listen: 127.0.0.1:{client}",
             "http: 127.0.0.1:8222": f"http: 127.0.0.1:{monitor}",
             "pid_file: /var/run/nats/nats.pid": f"pid_file: {home}/nats.pid",
             "store_dir: /data": f"store_dir: {home}/data",
             "listen: 0.0.0.0:6222": f"listen: 127.0.0.1:{routes[i]}",
             **{f"nats://nats-{j}.nats-headless:6222": f"nats://127.0.0.1:{port}" for j, port in enumerate(routes)}}
    for old, new in moves.items():
        assert old in text, f"nats.conf no longer has {old!r}"
        text = text.replace(old, new)
    return text


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[list[tuple[subprocess.Popen[bytes], int, int, int]]]:
    """nats-0..2 started together (podManagementPolicy: Parallel): (process, client, monitor, route)."""
    ports = free_ports(9)  # distinct: separate free_port() calls may repeat one
    text, routes = CONF.read_text(), ports[:3]
    shared = security.generate(tmp_path / "secrets")
    servers = []
    for i in range(3):
        home = tmp_path / f"nats-{i}"
        # As the StatefulSet mounts them: the config at <dir>/config, Secret raybus-bus at
        # <dir>/secrets (the config includes ../secrets/nats-auth.conf, TLS + per-role users).
        (home / "config").mkdir(parents=True)
        shutil.copytree(shared, home / "secrets")  # one Secret raybus-bus, mounted by every server
        client, monitor = ports[3 + 2 * i], ports[4 + 2 * i]
        (home / "config" / "nats.conf").write_text(local_conf(text, i, client, monitor, routes, home))
        proc = subprocess.Popen([_binary("nats-server"), "--config", str(home / "config" / "nats.conf")],
                                env={**os.environ, "POD_NAME": f"nats-{i}",
                                     "NATS_ROUTE_ADVERTISE": f"127.0.0.1:{routes[i]}"}, cwd=home,
                                stdout=(home / "log").open("wb"), stderr=subprocess.STDOUT,
                                preexec_fn=die_with_parent())  # noqa: PLW1509
        servers.append((proc, client, monitor, routes[i]))
    yield servers
    for proc, _, _, _ in servers:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)


def admin_options(urls: list[str], tmp_path: Path) -> dict[str, Any]:
    """bus-admin over TLS, to any of the three servers (they share one CA and user set)."""
    home = tmp_path / "secrets"
    return {"servers": urls, "user": "bus-admin", "password": security.password(home, "bus-admin"),
            "tls": ssl.create_default_context(cafile=str(home / "ca.pem"))}


async def test_streams_and_kv_on_three_servers_survive_one_loss(
        cluster: list[tuple[subprocess.Popen[bytes], int, int, int]], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    for _, _, monitor, _ in cluster:  # the StatefulSet's startup and liveness probes
        until(lambda m=monitor: http_status(f"http://127.0.0.1:{m}/healthz") == 200, "startup probe")
        assert http_status(f"http://127.0.0.1:{monitor}/healthz?js-enabled-only=true") == 200
        assert http_status(f"http://127.0.0.1:{monitor}/healthz?js-server-only=true") == 200
    nc = await nats.connect(**admin_options([f"tls://127.0.0.1:{c}" for _, c, _, _ in cluster], tmp_path),
                            max_reconnect_attempts=-1)
    try:
        js = nc.jetstream()
        settings = BusSettings(partitions=4, replicas=3)  # RAYBUS_STREAM_REPLICAS, raybus-config nats.streamReplicas
        await ensure_streams(js, settings)
        leases = await ensure_leases(js, settings)
        ledger = await BatchLedger.open(js, replicas=settings.replicas)
        names = [c.name or "" for c in stream_configs(settings)] + [f"KV_{s.KV_LEASES}", f"KV_{s.KV_BATCHES}"]
        for name in names:
            info = await js.stream_info(name)
            assert info.config.num_replicas == 3, name
            assert info.cluster is not None and len(info.cluster.replicas or []) == 2, name
        # Stop the server leading the commands stream: the other two elect a leader, writes go on.
        info = (await js.stream_info(s.STREAM_COMMANDS)).cluster
        assert info is not None and info.leader in {f"nats-{i}" for i in range(3)}
        down = cluster[int(info.leader.removeprefix("nats-"))][0]
        down.terminate()
        down.wait(timeout=60)
        deadline = time.monotonic() + DEADLINE_S

        async def once_elected(what: str, op: Callable[[], Awaitable[T]]) -> T:
            # Until the remaining two elected a leader, a request finds no responder: nats-py
            # raises NoStreamResponseError (a JetStream publish) or NoRespondersError, or times out.
            while True:
                try:
                    return await op()
                except (NoRespondersError, NoStreamResponseError, TimeoutError, nats.errors.TimeoutError):
                    assert time.monotonic() < deadline, f"no {what} leader after one server stopped"
                    await asyncio.sleep(0.2)
        ack = await once_elected("commands stream", lambda: js.publish(
            s.command_subject("cluster", "default", "c"), b"{}", timeout=5, headers={"Nats-Msg-Id": "after-loss"}))
        assert ack.stream == s.STREAM_COMMANDS and ack.seq >= 1
        after = (await js.stream_info(s.STREAM_COMMANDS)).cluster
        assert after is not None and after.leader != info.leader
        assert await once_elected("leases KV", lambda: leases.put(s.lease_key("cluster", 0), b"me")) >= 1
        record, _ = await once_elected("batches KV", lambda: ledger.get("absent"))
        assert record is None
        # /metrics (the watcher's bus state) shows the lost server: RaybusNatsNodeLost's series
        state = BusState(nc, timeout_s=2)
        while True:
            replicas = {labels[1]: v for name, labels, v in await state.read()
                        if name == "raybus_stream_replicas" and labels[0] == s.STREAM_COMMANDS}
            if replicas.get("offline") == 1:
                break
            assert time.monotonic() < deadline, f"the lost server not offline in the stream's replicas: {replicas}"
            await asyncio.sleep(0.5)
        assert replicas["current"] + replicas["lagging"] == 2
    finally:
        await nc.close()


def routes_of(monitor: int) -> set[str]:
    """The server names this server has a route to (NATS's /routez); none while its monitoring
    port is not listening yet (a loaded machine starts the three servers slowly)."""
    try:
        body = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{monitor}/routez", timeout=2).read())
    except OSError:
        return set()
    return {r.get("remote_name", "") for r in body.get("routes") or []}


def rogue(home: Path, route_to: int, tls: str) -> tuple[subprocess.Popen[bytes], Path]:
    """A nats-server that tries to join the cluster through nats-0's route port: plaintext, or TLS
    with its own CA's certificate (what anyone may make), never the install's."""
    port, cport, mport = free_ports(3)
    home.mkdir(parents=True)
    (home / "nats.conf").write_text(
        f'server_name: "rogue"\nlisten: "127.0.0.1:{port}"\nhttp: "127.0.0.1:{mport}"\n'
        f'cluster {{ name: "raybus", listen: "127.0.0.1:{cport}", routes: ["nats://127.0.0.1:{route_to}"]\n{tls}}}\n')
    log = home / "log"
    proc = subprocess.Popen([_binary("nats-server"), "-c", str(home / "nats.conf"), "-D"], cwd=home,
                            stdout=log.open("wb"), stderr=subprocess.STDOUT, preexec_fn=die_with_parent())  # noqa: PLW1509
    return proc, log


def test_routes_take_only_the_installs_servers(cluster: list[tuple[subprocess.Popen[bytes], int, int, int]],
                                                tmp_path: Path) -> None:
    """A route is mutual TLS with the install's CA (bus/security.py nats_routes_config): a server
    speaking plaintext, or TLS with a certificate of another CA, never becomes a route, while the
    three servers route to each other."""
    names = {f"nats-{i}" for i in range(3)}
    for i, (_, _, monitor, _) in enumerate(cluster):
        until(lambda m=monitor, me=f"nats-{i}": routes_of(m) >= names - {me}, "the three servers routed")
    # A certificate of another CA, and the rogue does not check nats-0's: only nats-0 can refuse it.
    other = security.generate(tmp_path / "other-ca")
    foreign = json.dumps({"cert_file": str(other / "server.pem"), "key_file": str(other / "server-key.pem"),
                          "insecure": True, "timeout": 5})
    attempts = [rogue(tmp_path / "plain", cluster[0][3], ""), rogue(tmp_path / "foreign", cluster[0][3],
                                                                     f"tls: {foreign}\n")]
    try:
        for proc, log in attempts:  # each was answered, and tried again, at least twice
            until(lambda log=log: log.read_text(errors="replace").count("Router connection closed") >= 2,
                  f"the rogue's route attempts closed ({log})")
            assert proc.poll() is None
        for _, _, monitor, _ in cluster:
            assert "rogue" not in routes_of(monitor)
        # nats-0 saw both and said why: no TLS at all, and a client certificate it could not verify.
        refusals = (tmp_path / "nats-0" / "log").read_text(errors="replace")
        assert "does not look like a TLS handshake" in refusals and "unknown authority" in refusals
    finally:
        for proc, _ in attempts:
            proc.terminate()
            proc.wait(timeout=30)
