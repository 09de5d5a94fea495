"""`python -m raybus_sim.dashboard --port N` as its own process, driven over HTTP only."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from raybus.adapters.dashboard import DashboardUnreachable, RayDashboardClient
from raybus_sim.testing.servers import free_port

pytestmark = pytest.mark.integration


def wait_listening(port: int, proc: subprocess.Popen[bytes], *, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "exited"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"simulator did not listen on {port}")


@pytest.fixture
def sim_process() -> Iterator[int]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "raybus_sim.dashboard", "--port", str(port), "--up", "team-a/rc-1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_listening(port, proc)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_module_entrypoint_serves_and_obeys_control_api(sim_process: int) -> None:
    root = f"http://127.0.0.1:{sim_process}"
    async with httpx.AsyncClient() as http:
        client = RayDashboardClient(http, base_url=f"{root}/team-a/rc-1", get_attempts=1)
        assert (await client.get_version()).ray_version == "2.60.0"
        assert await client.check_gcs_health() is True
        overview = (await http.get(f"{root}/sim/dashboards")).json()
        assert [(c["namespace"], c["name"], c["up"]) for c in overview["clusters"]] == [
            ("team-a", "rc-1", True)
        ]
        down = await http.post(f"{root}/sim/dashboards/team-a/rc-1/head", json={"up": False})
        assert down.json() == {"up": False}
        with pytest.raises(DashboardUnreachable):
            await client.get_version()
        counts = (await http.get(f"{root}/sim/dashboards/team-a/rc-1/requests")).json()
        assert counts == {"GET /api/version": 1, "GET /api/gcs_healthz": 1, "total": 2, "refused": 1}
