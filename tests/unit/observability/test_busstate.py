"""The bus gauges (observability/busstate.py) from JetStream's own JSON answers."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from raybus.observability import busstate

STREAM_INFO = {
    "config": {"name": "RAYBUS_COMMANDS"},
    "state": {"messages": 3, "bytes": 900, "first_seq": 41, "first_ts": "2026-01-01T00:00:10.123456789Z",
              "last_seq": 43, "consumer_count": 1},
    "cluster": {"leader": "n1", "replicas": [{"name": "n2", "current": True},
                                             {"name": "n3", "current": False, "offline": True}]},
}
CONSUMER = {"stream_name": "RAYBUS_COMMANDS", "name": "command-executor", "created": "2026-01-01T00:00:00Z",
            "config": {"durable_name": "command-executor"}, "num_pending": 2, "num_ack_pending": 1,
            "num_redelivered": 1, "num_waiting": 0,
            "delivered": {"last_active": "2026-01-01T00:00:11Z"}, "ack_floor": {}}


def test_stream_state_and_replicas() -> None:
    got = {(name, tuple(labels)): v for name, labels, v in busstate.stream_samples(STREAM_INFO)}
    assert got[("raybus_stream_messages", ("RAYBUS_COMMANDS",))] == 3
    assert got[("raybus_stream_first_sequence", ("RAYBUS_COMMANDS",))] == 41
    assert got[("raybus_stream_oldest_message_timestamp_seconds", ("RAYBUS_COMMANDS",))] == 1767225610.123456
    # the leader and one peer current, the lost node offline
    assert got[("raybus_stream_replicas", ("RAYBUS_COMMANDS", "current"))] == 2
    assert got[("raybus_stream_replicas", ("RAYBUS_COMMANDS", "offline"))] == 1
    empty = {**STREAM_INFO, "state": {"messages": 0, "first_ts": "2026-01-01T00:00:10Z"}, "cluster": {}}
    names = {name for name, _, _ in busstate.stream_samples(empty)}
    assert "raybus_stream_oldest_message_timestamp_seconds" not in names  # nothing waits
    assert "raybus_stream_replicas" not in names  # a single server: no cluster to report


def test_a_consumer_that_never_acked_reports_its_creation_as_last_ack() -> None:
    got = {name: v for name, _, v in busstate.consumer_samples(CONSUMER)}
    assert got["raybus_consumer_pending_messages"] == 2
    assert got["raybus_consumer_ack_pending_messages"] == 1
    assert got["raybus_consumer_last_ack_timestamp_seconds"] == 1767225600.0
    assert got["raybus_consumer_last_delivery_timestamp_seconds"] == 1767225611.0


def test_the_collector_serves_the_last_read() -> None:
    state = busstate.BusState(None)  # type: ignore[arg-type]  # never runs
    state.samples = busstate.stream_samples(STREAM_INFO) + busstate.consumer_samples(CONSUMER)
    registry = CollectorRegistry()
    registry.register(state)
    text = generate_latest(registry).decode()
    assert 'raybus_consumer_waiting_pulls{consumer="command-executor",stream="RAYBUS_COMMANDS"} 0.0' in text
    assert 'raybus_stream_replicas{state="offline",stream="RAYBUS_COMMANDS"} 1.0' in text
