"""RAYBUS_STREAM_REPLICAS: every stream and KV bucket is kept on that many NATS servers
(deploy/kustomize sets 3 for its 3-node JetStream cluster, 1 in the dev overlay); every service
reads it through its settings (CommonSettings.stream_replicas) into BusSettings."""

from __future__ import annotations

import pytest

from raybus.bus.streams import BusSettings, stream_configs
from raybus.runtime.settings import CommonSettings


def test_default_is_one_replica(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAYBUS_STREAM_REPLICAS", raising=False)
    assert CommonSettings().stream_replicas == 1
    assert {c.num_replicas for c in stream_configs(BusSettings())} == {1}


def test_env_sets_every_stream_replicas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYBUS_STREAM_REPLICAS", "3")
    configs = stream_configs(BusSettings(partitions=4, replicas=CommonSettings().stream_replicas))
    assert len(configs) == 12  # one trigger stream per controller
    assert {c.num_replicas for c in configs} == {3}
    assert CommonSettings(stream_replicas=1).stream_replicas == 1  # an explicit setting wins


def test_empty_env_means_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYBUS_STREAM_REPLICAS", "")
    assert CommonSettings().stream_replicas == 1
