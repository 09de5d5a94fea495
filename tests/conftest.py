"""Shared fixtures: real nats-server (JetStream) and redis-server subprocesses, never fakes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from raybus.testing.servers import NatsServer, RedisServer, start_nats, start_redis

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
