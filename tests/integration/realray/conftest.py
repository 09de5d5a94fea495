"""One real Ray 2.60 head per pytest run (`make test-realray`), for the dashboard client, the log
tail and the dashboard-poller to talk to instead of the simulator.

Ray comes from `.rayvenv` (`make rayvenv`: `ray[default,serve]==2.60.0` from PyPI, apart from the
project's venv because Ray pins its own grpcio/protobuf/aiohttp). The head must stay on loopback:
even with `--node-ip-address 127.0.0.1` Ray binds its client server and internal ports to the
machine's address, so these tests run inside a network namespace whose only interface is `lo`
(the Makefile's `unshare --net --pid --fork --mount-proc`); the private PID namespace makes
`ray stop` at the end touch only this run's Ray processes. Outside that namespace, or without
`.rayvenv`, the fixture fails with the command to use: never a skip.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from raybus.adapters.dashboard import DashboardTimeouts, RayDashboardClient
from raybus.decisions.ray_events import ExportSettings, export_env
from tests.integration.dashboard.conftest import nc, tap  # noqa: F401  (the poller test's bus side)

REPO = Path(__file__).resolve().parents[3]
RAYVENV = Path(os.environ.get("RAYVENV", REPO / ".rayvenv"))
DASHBOARD_PORT = 8265
SERVE_PORT = 8000
# The head pushes its events (decisions/ray_events.py) where a test's poller listens, as raybus's
# head Pods do: the same env, built by the same code, for the poller kit's cluster ns/rc.
EVENTS_PORT = 18266
EVENTS_NS, EVENTS_CLUSTER, EVENTS_UID = "ns", "rc", "uid-realray-rc"
# A Serve app the head can import: the module sits in the head's working directory, which is on
# its workers' PYTHONPATH (set at `ray start`, inherited by the raylet and its workers).
APP_MODULE = '''
import os
import time

from ray import serve


@serve.deployment
class Hello:
    def __init__(self, greeting: str = "hello") -> None:
        if greeting == "crash":
            raise RuntimeError("realray: constructor failed on purpose")
        self.greeting = greeting

    def __call__(self, request) -> str:
        if "die=1" in str(request.url):  # test_pushed: the replica's process dies
            os._exit(1)
        return self.greeting


def app(args: dict) -> object:
    return Hello.bind(args.get("greeting", "hello"))


@serve.deployment(health_check_period_s=0.5, health_check_timeout_s=10, ray_actor_options={"num_cpus": 0})
class Gated:
    """test_serve_cadence: fails its health check while the file `flag` exists (Serve marks the app
    UNHEALTHY after 3 failures in a row and replaces the replica); a replacement's constructor
    waits for the file to go, so the app stays UNHEALTHY until then, then turns RUNNING."""

    def __init__(self, flag: str) -> None:
        self.flag = flag
        while os.path.exists(flag):
            time.sleep(0.1)

    def check_health(self) -> None:
        if os.path.exists(self.flag):
            raise RuntimeError("realray: unhealthy on purpose")

    def __call__(self, request) -> str:
        return "gated"


def gated_app(args: dict) -> object:
    return Gated.bind(args["flag"])
'''


@dataclass(frozen=True)
class RayHead:
    dashboard: str  # http://127.0.0.1:8265
    proxy: str  # http://127.0.0.1:8000
    workdir: Path
    events_key: str  # the poller's RAYBUS_RAY_EVENTS_KEY for this head's pushes
    events_port: int


def _isolated() -> None:
    names = [name for _, name in socket.if_nameindex()]
    if names != ["lo"] or os.environ.get("RAYBUS_REALRAY_NS") != "1":
        raise RuntimeError(
            "tests/integration/realray run a real Ray head and must run inside a loopback-only network "
            f"namespace with a private PID namespace (interfaces here: {names}): run `make test-realray` "
            "(as root: `unshare --net --pid --fork --mount-proc`)")
    if not (RAYVENV / "bin" / "ray").exists():
        raise RuntimeError(f"no Ray at {RAYVENV}/bin/ray: run `make rayvenv` (ray[default,serve]==2.60.0)")


def _ray(env: dict[str, str], cwd: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(RAYVENV / "bin" / "ray"), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.fixture(scope="session")
def ray_head() -> Iterator[RayHead]:
    _isolated()
    root = Path(tempfile.mkdtemp(prefix="rr", dir="/tmp"))  # short: Ray's unix socket paths live here
    workdir = root / "work"
    workdir.mkdir()
    (workdir / "realray_app.py").write_text(APP_MODULE)
    env = {**os.environ, "PATH": f"{RAYVENV / 'bin'}:{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(workdir), "RAY_USAGE_STATS_ENABLED": "0"}
    events_key = secrets.token_hex(16)
    export = ExportSettings(url=f"http://127.0.0.1:{EVENTS_PORT}", key=events_key)
    env.update({e["name"]: e["value"] for e in export_env(export, namespace=EVENTS_NS, cluster=EVENTS_CLUSTER,
                                                                     uid=EVENTS_UID)})
    env.pop("VIRTUAL_ENV", None)
    start = ("start", "--head", "--node-ip-address", "127.0.0.1", "--port", "6379",
             "--dashboard-host", "127.0.0.1", "--dashboard-port", str(DASHBOARD_PORT),
             "--num-cpus", "2", "--disable-usage-stats", "--temp-dir", str(root / "ray"))
    # Under load the dashboard agent can start too slowly ("The current node timed out during
    # startup"): stop what is left and start again.
    errors = []
    for _ in range(3):
        result = _ray(env, workdir, *start)
        if result.returncode == 0:
            break
        errors.append(result.stdout[-1500:] + result.stderr[-1500:])
        _ray(env, workdir, "stop", "--force", timeout=60)
    else:
        raise RuntimeError("ray start failed 3 times:\n" + "\n---\n".join(errors))
    head = RayHead(dashboard=f"http://127.0.0.1:{DASHBOARD_PORT}", proxy=f"http://127.0.0.1:{SERVE_PORT}",
                   workdir=workdir, events_key=events_key, events_port=EVENTS_PORT)
    deadline = time.monotonic() + 120
    while True:  # the dashboard's job module answers a little after `ray start` returns
        try:
            if httpx.get(f"{head.dashboard}/api/jobs/", timeout=5).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the Ray dashboard did not answer /api/jobs/ within 120 s")
        time.sleep(0.5)
    try:
        yield head
    finally:
        _ray(env, workdir, "stop", "--force", timeout=120)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


@pytest.fixture
def dashboard(ray_head: RayHead, http: httpx.AsyncClient) -> RayDashboardClient:
    # Reads get 10 s, not KubeRay's 2 s: this head shares 2 cores with the rest of the run. The
    # first Serve PUT took 11.5 s once and more than 20 s under load (and a PUT whose client gave
    # up left Serve started but the app never deployed), so writes get 120 s here.
    return RayDashboardClient(http, base_url=ray_head.dashboard, retry_wait_s=0.2, timeouts=DashboardTimeouts(
        read_s=10, submit_job_s=60, stop_job_s=60, delete_job_s=60, serve_put_s=120, serve_delete_s=120))
