"""`python -m dashboard_poller` as a real process: SIGKILL and restart neither loses nor repeats a
command, and republishes no observation that did not change."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from nats.aio.client import Client as NATS

from raybus.adapters.kube import KubeClient, new_api_client
from raybus.decisions.dashboard_contract import SubmitJob
from raybus_sim.apiserver import start_apiserver, write_kubeconfig
from raybus_sim.testing.servers import NatsServer, stop_process
from tests.integration.dashboard.conftest import Sim
from tests.integration.dashboard.poller_kit import (
    CLUSTER,
    FAST_POLLER,
    NS,
    ObservationTap,
    Reconciler,
    create_rayjob_owner,
    last_dashboard_seq,
    requests,
    until,
)

pytestmark = pytest.mark.integration


class PollerProcess:
    """The poller as deployed: its admission reads the RayJob from a (local) API server."""

    def __init__(self, nats_url: str, sim: Sim, log: Path, kubeconfig: Path) -> None:
        self.env = {**os.environ, "RAYBUS_NATS_URL": nats_url, "RAYBUS_KUBECONFIG": str(kubeconfig),
                    "RAYBUS_DASHBOARD_URL_TEMPLATE": sim.template,
                    "RAYBUS_PROXY_URL_TEMPLATE": sim.root + "/{namespace}/{cluster}/serve",
                    **{f"RAYBUS_{k.upper()}": str(v) for k, v in FAST_POLLER.items() if k != "admission"}}
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, replica: str) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "dashboard_poller", "--replica-id", replica],
                                         stdout=out, stderr=subprocess.STDOUT, env=self.env)

    def started(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, self.log.read_text()[-2000:]
        return self.log.exists() and b'"started"' in self.log.read_bytes()

    def stop(self, *, kill: bool = False) -> None:
        if self.proc is not None:
            stop_process(self.proc, kill=kill)


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[tuple[KubeClient, Path]]:
    srv = await start_apiserver(kubelet=False)
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", srv.url)
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    try:
        yield kube, kubeconfig
    finally:
        await kube.close()
        await srv.stop()


@pytest.fixture
def poller(nats_server: NatsServer, sim: Sim, tmp_path: Path, api: tuple[KubeClient, Path]) -> Iterator[PollerProcess]:
    proc = PollerProcess(nats_server.url, sim, tmp_path / "poller.log", api[1])
    yield proc
    proc.stop(kill=True)


async def test_sigkill_mid_write_neither_loses_nor_duplicates(poller: PollerProcess, sim: Sim,
                                                              nc: NATS, api: tuple[KubeClient, Path]) -> None:
    await create_rayjob_owner(api[0], job_id="j", entrypoint="sleep 60")
    await sim.control("PUT", f"/{NS}/{CLUSTER}/settings", {"job_write_s": 1.5})
    owner = Reconciler(nc)
    await owner.want(jobs=["j"])
    poller.start("p-1")
    await until(_started(poller), timeout=30, what="poller started")
    await owner.send("sub-j", SubmitJob(reason="r", cluster=CLUSTER, job_id="j", entrypoint="sleep 60"))
    await until(lambda: _posted(sim, 1), what="the POST reached the head")
    poller.stop(kill=True)  # mid-write: no result, no ack
    assert await owner.result("sub-j") is None
    poller.start("p-2")
    result = await until(lambda: owner.result("sub-j"), timeout=30, what="result after the restart")
    # Not lost: the new process takes the lapsed claim over and answers it. Not duplicated: a
    # takeover looks at the head first (the dead holder may have applied it) and finds the job,
    # which the head wrote 1.5 s after the first POST, long before the claim's lease lapsed.
    assert result.result.state == "ok"
    assert (await requests(sim))["POST /api/jobs/"] == 1  # not sent again
    listing = (await sim.http.get(f"{sim.root}/{NS}/{CLUSTER}/api/jobs/")).json()
    assert [j["submission_id"] for j in listing] == ["j"]


async def test_restart_republishes_nothing_unchanged(poller: PollerProcess, sim: Sim, nc: NATS,
                                                     api: tuple[KubeClient, Path]) -> None:
    await create_rayjob_owner(api[0], job_id="j", entrypoint="sleep 120")
    tap = ObservationTap()
    await tap.start(nc)
    owner = Reconciler(nc)
    await owner.send("sub-j", SubmitJob(reason="r", cluster=CLUSTER, job_id="j", entrypoint="sleep 120"))
    await owner.want(jobs=["j"], serve=True, expect_change=True)
    poller.start("p-1")
    try:
        await until(lambda: _running(tap), timeout=30, what="RUNNING observed")
        seq = await last_dashboard_seq(nc)
        poller.stop(kill=True)
        poller.start("p-2")
        before = (await requests(sim))["total"]
        # The new process (after the dead one's lease expired) reads the head again, several rounds.
        await until(lambda: _requests_above(sim, before + 6), timeout=30, what="the restarted poller polling")
        assert await last_dashboard_seq(nc) == seq
    finally:
        await tap.stop()


def _started(poller: PollerProcess) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return poller.started()
    return check


async def _posted(sim: Sim, n: int) -> bool:
    return (await requests(sim)).get("POST /api/jobs/", 0) >= n


async def _requests_above(sim: Sim, n: int) -> bool:
    return (await requests(sim))["total"] >= n


async def _running(tap: ObservationTap) -> bool:
    return bool(tap.jobs("j")) and tap.jobs("j")[-1] == "RUNNING"
