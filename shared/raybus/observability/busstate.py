"""The bus as Prometheus sees it: every raybus stream's backlog and replicas, and every durable
consumer of the work-queue streams, read from JetStream's own state (stream info, consumer list).

One process reads it for everybody (the watcher: every install has one, it consumes no work
queue), so a consumer that stops, whatever its process, still shows: its pending messages grow
and its last ack ages. Gauges of the last successful read; a stream or consumer gone from
JetStream is gone from the next scrape. With several watcher replicas each exports the same
values: aggregate with max by (stream[, consumer]).

Raw JetStream API requests (the JSON nats-py's models drop: the oldest message's time, the
replicas' offline flags, the consumers' last ack/delivery times).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from nats.aio.client import Client as NATS
from nats.errors import Error as NatsError
from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from raybus.bus import subjects as s

log = logging.getLogger(__name__)
Json = dict[str, Any]

TRIGGER_STREAMS = tuple(s.trigger_stream(c) for c in s.Controller)
STREAMS = (s.STREAM_OBJECTS, *TRIGGER_STREAMS, s.STREAM_COMMANDS, s.STREAM_STATUS, s.STREAM_OUTCOMES,
           s.STREAM_DASHBOARD, s.STREAM_DASHBOARD_INTEREST, s.STREAM_DASHBOARD_COMMANDS,
           s.STREAM_DASHBOARD_RESULTS, s.STREAM_DEAD_LETTERS)
# The work queues: their durable consumers are the services' inputs (the others are read by
# ordered consumers of caches, which come and go with each process).
WORK_QUEUES = (*TRIGGER_STREAMS, s.STREAM_COMMANDS, s.STREAM_STATUS, s.STREAM_DASHBOARD_COMMANDS)
API = "$JS.API"

_STREAM_GAUGES = {
    "raybus_stream_messages": "Messages held by the stream (a work queue: not yet acked)",
    "raybus_stream_bytes": "Bytes held by the stream",
    "raybus_stream_first_sequence": "Sequence of the oldest message the stream holds",
    "raybus_stream_last_sequence": "Sequence of the newest message the stream took (only grows)",
    "raybus_stream_consumers": "Consumers of the stream",
    "raybus_stream_oldest_message_timestamp_seconds":
        "Unix time of the oldest message the stream holds (absent when empty)",
}
_CONSUMER_GAUGES = {
    "raybus_consumer_pending_messages": "Messages of the stream not yet delivered to the consumer (its lag)",
    "raybus_consumer_ack_pending_messages": "Messages delivered to the consumer and not yet acked",
    "raybus_consumer_redelivered_messages": "Messages delivered more than once and not yet acked",
    "raybus_consumer_waiting_pulls": "Pull requests waiting on the consumer (0: nobody is pulling)",
    "raybus_consumer_last_ack_timestamp_seconds":
        "Unix time of the consumer's last ack (its creation when it never acked)",
    "raybus_consumer_last_delivery_timestamp_seconds":
        "Unix time of the consumer's last delivery (its creation when it never delivered)",
}


def _ts(value: object) -> float | None:
    if not isinstance(value, str) or not value or value.startswith("0001-"):
        return None
    text = value.rstrip("Z")
    head, _, frac = text.partition(".")
    try:  # RFC 3339 with nanoseconds: Python keeps microseconds
        return datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}+00:00").timestamp()
    except ValueError:
        return None


def stream_samples(info: Json) -> list[tuple[str, list[str], float]]:
    """The gauges of one stream info answer: (family, label values, value)."""
    name = str((info.get("config") or {}).get("name") or "")
    state = info.get("state") or {}
    out = [("raybus_stream_messages", [name], float(state.get("messages") or 0)),
           ("raybus_stream_bytes", [name], float(state.get("bytes") or 0)),
           ("raybus_stream_first_sequence", [name], float(state.get("first_seq") or 0)),
           ("raybus_stream_last_sequence", [name], float(state.get("last_seq") or 0)),
           ("raybus_stream_consumers", [name], float(state.get("consumer_count") or 0))]
    first = _ts(state.get("first_ts"))
    if state.get("messages") and first is not None:
        out.append(("raybus_stream_oldest_message_timestamp_seconds", [name], first))
    cluster = info.get("cluster") or {}
    if cluster.get("leader") or cluster.get("replicas"):
        peers = cluster.get("replicas") or []
        counts = {"current": 1.0 if cluster.get("leader") else 0.0, "lagging": 0.0, "offline": 0.0}
        for peer in peers:
            state_of = "offline" if peer.get("offline") else "current" if peer.get("current") else "lagging"
            counts[state_of] += 1
        out += [("raybus_stream_replicas", [name, k], v) for k, v in counts.items()]
    return out


def consumer_samples(info: Json) -> list[tuple[str, list[str], float]]:
    stream, name = str(info.get("stream_name") or ""), str(info.get("name") or "")
    created = _ts(info.get("created")) or 0.0
    acked = _ts((info.get("ack_floor") or {}).get("last_active")) or created
    delivered = _ts((info.get("delivered") or {}).get("last_active")) or created
    labels = [stream, name]
    return [("raybus_consumer_pending_messages", labels, float(info.get("num_pending") or 0)),
            ("raybus_consumer_ack_pending_messages", labels, float(info.get("num_ack_pending") or 0)),
            ("raybus_consumer_redelivered_messages", labels, float(info.get("num_redelivered") or 0)),
            ("raybus_consumer_waiting_pulls", labels, float(info.get("num_waiting") or 0)),
            ("raybus_consumer_last_ack_timestamp_seconds", labels, acked),
            ("raybus_consumer_last_delivery_timestamp_seconds", labels, delivered)]


class BusState(Collector):
    """The last snapshot read, served at scrape time; `run` refreshes it every `interval_s`."""

    def __init__(self, nc: NATS, *, interval_s: float = 10.0, timeout_s: float = 5.0) -> None:
        self._nc = nc
        self.interval_s = interval_s
        self._timeout = timeout_s
        self.samples: list[tuple[str, list[str], float]] = []

    async def _api(self, subject: str, body: Json | None = None) -> Json:
        reply = await self._nc.request(f"{API}.{subject}", json.dumps(body or {}).encode(),
                                       timeout=self._timeout)
        answer: Json = json.loads(reply.data)
        if "error" in answer:
            raise RuntimeError(f"{subject}: {answer['error']}")
        return answer

    async def read(self) -> list[tuple[str, list[str], float]]:
        samples: list[tuple[str, list[str], float]] = []
        for stream in STREAMS:
            try:
                samples += stream_samples(await self._api(f"STREAM.INFO.{stream}"))
            except (RuntimeError, ValueError, NatsError, TimeoutError) as exc:  # not declared yet, an election
                log.debug("stream info not read", extra={"stream": stream, "error": repr(exc)})
                continue
            if stream not in WORK_QUEUES:
                continue
            offset = 0
            while True:  # CONSUMER.LIST pages (256 a page)
                try:
                    page = await self._api(f"CONSUMER.LIST.{stream}", {"offset": offset})
                except (RuntimeError, ValueError, NatsError, TimeoutError) as exc:
                    log.debug("consumers not listed", extra={"stream": stream, "error": repr(exc)})
                    break
                consumers = page.get("consumers") or []
                for info in consumers:
                    if (info.get("config") or {}).get("durable_name"):
                        samples += consumer_samples(info)
                offset += len(consumers)
                if not consumers or offset >= int(page.get("total") or 0):
                    break
        return samples

    async def run(self) -> None:
        while True:
            try:
                self.samples = await self.read()
            except Exception:
                log.warning("bus state not read", exc_info=True)
            await asyncio.sleep(self.interval_s)

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        families: dict[str, GaugeMetricFamily] = {}
        for name, help_text in _STREAM_GAUGES.items():
            families[name] = GaugeMetricFamily(name, help_text, labels=["stream"])
        families["raybus_stream_replicas"] = GaugeMetricFamily(
            "raybus_stream_replicas", "Servers keeping the stream, by state (current, lagging, offline)",
            labels=["stream", "state"])
        for name, help_text in _CONSUMER_GAUGES.items():
            families[name] = GaugeMetricFamily(name, help_text, labels=["stream", "consumer"])
        for name, labels, value in self.samples:
            families[name].add_metric(labels, value)
        return list(families.values())


_registered: list[BusState] = []


def export(state: BusState) -> None:
    """Register `state` as the process's bus collector (one per process; a later one replaces it)."""
    for old in _registered:
        REGISTRY.unregister(old)
    _registered[:] = [state]
    REGISTRY.register(state)


def unexport(state: BusState) -> None:
    if state in _registered:
        REGISTRY.unregister(state)
        _registered.remove(state)
