"""The probes deploy/kustomize gives every service, on a real service process: /healthz answers as
soon as the process serves its metrics port, /readyz only once the service has started (here:
not while its NATS is unreachable, then once NATS is up), and the process exits on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from raybus_sim.testing.servers import die_with_parent, free_port, start_nats

pytestmark = pytest.mark.integration
DEADLINE_S = 30.0


def status(port: int, path: str) -> int:
    try:
        return int(urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2).status)
    except urllib.error.HTTPError as err:
        return err.code
    except OSError:
        return 0  # not listening yet


def until(cond: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not cond():
        assert time.monotonic() < deadline, f"not within {DEADLINE_S}s: {what}"
        time.sleep(0.05)


def test_ready_only_once_started(tmp_path: Path) -> None:
    nats_port, metrics_port, api_port, dash_port = free_port(), free_port(), free_port(), free_port()
    kubeconfig = tmp_path / "kubeconfig"
    # The poller's admission reads the Ray objects from an API server (the local one here).
    api = subprocess.Popen([sys.executable, "-m", "raybus_sim", "--port", str(api_port), "--kubeconfig",
                            str(kubeconfig), "--dashboard-port", str(dash_port)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.STDOUT, preexec_fn=die_with_parent())  # noqa: PLW1509
    until(lambda: kubeconfig.exists() and status(api_port, "/readyz") == 200, "the local API server")
    env = {"RAYBUS_NATS_URL": f"nats://127.0.0.1:{nats_port}", "RAYBUS_METRICS_PORT": str(metrics_port),
           "RAYBUS_METRICS_ADDR": "127.0.0.1", "RAYBUS_REPLICA_ID": "probe-0", "PATH": "/usr/bin:/bin",
           "RAYBUS_KUBECONFIG": str(kubeconfig)}
    log = (tmp_path / "poller.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "dashboard_poller"], env=env, stdout=log,
                            stderr=subprocess.STDOUT, preexec_fn=die_with_parent())  # noqa: PLW1509
    nats = None
    try:
        until(lambda: status(metrics_port, "/healthz") == 200, "/healthz answers")
        assert status(metrics_port, "/readyz") == 503  # NATS unreachable: not started
        nats = start_nats(tmp_path / "nats", port=nats_port)
        until(lambda: status(metrics_port, "/readyz") == 200, "/readyz once NATS is up")
        assert b'"started"' in (tmp_path / "poller.log").read_bytes()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=DEADLINE_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        api.kill()
        if nats is not None:
            nats.stop()
