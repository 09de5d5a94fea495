"""Shared fixtures: real nats-server (JetStream) and redis-server subprocesses, never fakes, and
one real Kubernetes control plane (etcd + kube-apiserver + kube-controller-manager) per run."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from raybus_sim.testing.envtest import ControlPlane, install_crds, start_control_plane
from raybus_sim.testing.servers import NatsServer, RedisServer, start_nats, start_redis

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO.parent / "shared" / "kuberay-samples"
DASHBOARD_CAPTURES = REPO.parent / "shared" / "ray-dashboard"


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    server = start_nats(tmp_path / "nats")
    yield server
    server.stop()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = start_redis(tmp_path / "redis")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """The real API server (raybus_sim.testing.envtest), started once per pytest run by the first test
    that asks for it (~10 s) and stopped by PID at the end; tests isolate by `namespace`."""
    cp = start_control_plane(tmp_path_factory.mktemp("envtest"))
    yield cp
    cp.stop()


@pytest.fixture(scope="session")
def ray_crds(control_plane: ControlPlane) -> ControlPlane:
    """The control plane with the ray.io CRDs (deploy/crds) installed and Established."""
    install_crds(control_plane, [REPO / "deploy" / "crds"])
    return control_plane


@pytest.fixture
def namespace(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace on the real server for this test, deleted afterwards (the namespace
    controller of kube-controller-manager removes its contents)."""
    stem = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{stem or 't'}-{secrets.token_hex(3)}"
    control_plane.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    # Pods are refused until the ServiceAccount controller made the namespace's `default` SA.
    control_plane.wait_for(lambda: control_plane.request(
        "GET", f"/api/v1/namespaces/{name}/serviceaccounts/default"), f"{name}/default ServiceAccount")
    yield name
    control_plane.request("DELETE", f"/api/v1/namespaces/{name}")
