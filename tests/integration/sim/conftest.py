"""Fixtures: the local API server on a real socket, a kubernetes-asyncio client pointed at it via kubeconfig."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client, config

from raybus_sim.apiserver import DEFAULT_CRD_DIR, RunningApiServer, start_apiserver, write_kubeconfig
from raybus_sim.kubelet import Delays, KubeletConfig

FIXTURE_CRDS = Path(__file__).parent / "fixtures" / "crds"
FAST = Delays(schedule=0.01, pull=0.01, start=0.01, ready=0.02, restart=0.01, terminate=0.0)


def crd_dir() -> Path:
    """The generated ray.io CRDs once deploy/crds has them; the small fixture until then."""
    if any(DEFAULT_CRD_DIR.glob("*rayclusters*")):
        return DEFAULT_CRD_DIR
    return FIXTURE_CRDS


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[RunningApiServer]:
    srv = await start_apiserver(crd_dir=FIXTURE_CRDS, kubelet=KubeletConfig(delays=FAST), orphan_check_delay=0.05)
    yield srv
    await srv.stop()


@pytest.fixture
async def api(server: RunningApiServer, tmp_path: Path) -> AsyncIterator[client.ApiClient]:
    kc = write_kubeconfig(tmp_path / "kubeconfig", server.url)
    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(kc), client_configuration=cfg)
    async with client.ApiClient(cfg) as api_client:
        yield api_client
