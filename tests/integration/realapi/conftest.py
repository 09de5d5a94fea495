"""Fixtures for raybus services on the real control plane (tests/conftest.py starts it)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from raybus_sim.testing.envtest import ControlPlane
from raybus_sim.testing.servers import NatsServer, RedisServer
from tests.integration.realapi.kit import RealApiServices


@pytest.fixture
def services(ray_crds: ControlPlane, namespace: str, nats_server: NatsServer, redis_server: RedisServer,
             tmp_path: Path) -> Iterator[RealApiServices]:
    env = {**os.environ, "RAYBUS_NATS_URL": nats_server.url, "RAYBUS_REDIS_URL": redis_server.url,
           "RAYBUS_METRICS_PORT": "0"}
    env.pop("RAYBUS_KUBECONFIG", None)  # only the services that hold credentials get one
    svc = RealApiServices(cp=ray_crds, namespace=namespace, home=tmp_path, env=env)
    try:
        yield svc
    finally:
        svc.stop()
