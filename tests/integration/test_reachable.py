"""A service started before NATS, Redis or the API server (containers start in any order, and
nothing waits on healthchecks) waits, saying what for, and starts once they answer."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from raybus.runtime.reachable import redact, wait_until_reachable
from raybus_sim.apiserver import start_apiserver, write_kubeconfig
from raybus_sim.testing.servers import free_port, start_nats, start_redis, stop_process

pytestmark = pytest.mark.integration


def test_redact_keeps_no_credentials() -> None:
    assert redact("redis://user:s3cret@redis:6379/0") == "redis://redis:6379"
    # a NATS cluster's server list (RAYBUS_NATS_URL), each redacted
    assert redact("tls://a:x@127.0.0.1:4222,tls://127.0.0.1:4223") == "tls://127.0.0.1:4222,tls://127.0.0.1:4223"
    assert redact("nats://tok@nats:4222") == "nats://nats:4222"


class Lines:
    """A process's stderr, read by a thread, so a test can wait for a line with a deadline."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert proc.stderr is not None
        stream = proc.stderr
        threading.Thread(target=lambda: self.lines.extend(iter(stream.readline, "")), daemon=True).start()

    def wait_for(self, needle: str, timeout_s: float = 60.0) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = next((line for line in list(self.lines) if needle in line), None)
            if found is not None:
                return found
            time.sleep(0.05)
        raise AssertionError(f"no line with {needle!r} in {timeout_s} s:\n{''.join(self.lines[-20:])}")


def test_a_reconciler_started_first_waits_for_nats_and_redis(tmp_path: Path) -> None:
    nats_port, redis_port = free_port(), free_port()
    env = {**os.environ, "RAYBUS_NATS_URL": f"nats://127.0.0.1:{nats_port}",
           "RAYBUS_REDIS_URL": f"redis://:pw@127.0.0.1:{redis_port}/0", "RAYBUS_METRICS_PORT": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "job_reconciler", "--replica-id", "early"], env=env,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    nats = redis = None
    try:
        lines = Lines(proc)
        waiting = lines.wait_for("waiting for NATS at")
        assert f"nats://127.0.0.1:{nats_port}" in waiting and "retry_in_s" in waiting
        assert proc.poll() is None  # it waits instead of exiting (and crash-looping)
        nats = start_nats(tmp_path / "nats", port=nats_port)
        lines.wait_for("NATS at")  # answered
        waiting = lines.wait_for("waiting for Redis at")
        assert "pw" not in waiting  # the password never reaches the log
        redis = start_redis(tmp_path / "redis", port=redis_port)
        lines.wait_for('"started"')
    finally:
        proc.terminate()
        stop_process(proc)
        for server in (nats, redis):
            if server is not None:
                server.stop()


async def test_waits_for_the_kubeconfig_and_the_api_server(tmp_path: Path,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    kubeconfig = tmp_path / "kube" / "config"
    port = free_port()
    log = logging.getLogger("test-reachable")
    caplog.set_level(logging.INFO, logger="test-reachable")
    waiter = asyncio.create_task(wait_until_reachable(
        ["kube"], nats_url="", redis_url="", kubeconfig=str(kubeconfig), log=log))

    async def logged(text: str) -> None:
        async with asyncio.timeout(30):
            while not any(text in r.getMessage() + str(getattr(r, "error", "")) for r in caplog.records):
                await asyncio.sleep(0.05)

    await logged("not written yet")  # the file another container writes is not there yet
    write_kubeconfig(kubeconfig, f"http://127.0.0.1:{port}")
    await logged(f"Cannot connect to host 127.0.0.1:{port}")  # the file is, the API server is not
    assert not waiter.done()
    api = await start_apiserver("127.0.0.1", port)
    try:
        async with asyncio.timeout(30):
            await waiter
        assert any("answers" in r.getMessage() for r in caplog.records)
    finally:
        await api.stop()
