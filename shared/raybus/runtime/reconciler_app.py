"""The process around one controller: NATS + Redis connections, snapshot cache, runtime.

Each reconciler service's `create_app` builds one of these with its controller, the kinds its
snapshot needs, and a factory for its reconcile function (which gets a `ReconcilerContext`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from nats.aio.client import Client as NATS

from raybus.adapters.redis_state import StateStore
from raybus.bus import subjects as s
from raybus.bus.connect import connect_nats, redis_client
from raybus.bus.envelopes import CommandBatch, ObjectKey
from raybus.bus.ledger import BatchLedger
from raybus.bus.publish import publish_commands, publish_status
from raybus.bus.streams import BusSettings, ensure_streams
from raybus.decisions.commands import Command, UpdateStatus
from raybus.decisions.settings import DecisionSettings
from raybus.observability import kuberay
from raybus.runtime.batches import BatchResolver, PublishedBatches
from raybus.runtime.cache import ObjectCache
from raybus.runtime.controller import ControllerRuntime, ReconcileFn
from raybus.runtime.outcomes import OutcomeTracker
from raybus.runtime.process import serve
from raybus.runtime.settings import ReconcilerSettings, load

log = logging.getLogger(__name__)
# The primary kinds whose KubeRay metrics a reconciler exports (observability/kuberay.py).
KUBERAY_KINDS = {s.Kind.RAYCLUSTER: "RayCluster", s.Kind.RAYJOB: "RayJob", s.Kind.RAYSERVICE: "RayService"}


@dataclass
class ReconcilerContext:
    nc: NATS
    cache: ObjectCache
    store: StateStore
    controller: s.Controller
    settings: ReconcilerSettings
    outcomes: OutcomeTracker
    batches: BatchResolver
    published: PublishedBatches
    ledger: BatchLedger

    async def publish(self, *, key: ObjectKey, kind: s.Kind, commands: list[Command],
                      reasons: list[str], uid: str | None = None,
                      resource_version: str | None = None, batch_id: str | None = None) -> str:
        """Publish one reconcile's commands as an ordered batch; returns its id (the Outcome's
        reconcile_id, and the Nats-Msg-Id that makes a republish idempotent). A status write
        goes separately to the object's last-value status subject, as `status_batch_id(id)`."""
        reconcile_id = batch_id or uuid.uuid4().hex
        statuses = [c for c in commands if isinstance(c, UpdateStatus)]
        others = [c for c in commands if not isinstance(c, UpdateStatus)]
        js = self.nc.jetstream()
        common = {"key": key, "kind": kind.value, "uid": uid, "resource_version": resource_version,
                  "controller": self.controller.value, "reasons": reasons}
        if others:
            self.published.add(reconcile_id)
            try:
                await publish_commands(js, CommandBatch(reconcile_id=reconcile_id, commands=others,
                                                        **common))
            except BaseException:
                # Maybe not in the stream: the next reconcile asks the ledger (and revokes it).
                self.published.discard(reconcile_id)
                raise
        if statuses:
            await publish_status(js, CommandBatch(reconcile_id=s.status_batch_id(reconcile_id),
                                                  commands=statuses[-1:],
                                                  after=reconcile_id if others else None, **common))
        for command in commands:
            log.info(command.reason, extra={"key": str(key), "op": command.op,
                                             "reconcile_id": reconcile_id})
        return reconcile_id


class ReconcilerApp:
    def __init__(self, settings: ReconcilerSettings, *, controller: s.Controller,
                 primary_kind: s.Kind, kinds: list[s.Kind],
                 make_reconcile: Callable[[ReconcilerContext], ReconcileFn],
                 bus: BusSettings | None = None, dashboard: bool = False,
                 scopes: dict[s.Kind, str] | None = None, min_interval_s: float = 0.0) -> None:
        self.settings = settings
        # The settings' value if given (--min-interval-s), else this controller's own default.
        self._min_interval_s = (settings.min_interval_s if settings.min_interval_s is not None
                                else min_interval_s)
        self._controller = controller
        self._primary = primary_kind
        self._kinds = kinds
        self._make = make_reconcile
        self._dashboard = dashboard  # also follow dashboard observations and this controller's results
        self._scopes = scopes  # kinds followed in one subject scope only (ObjectCache)
        self._bus = bus or BusSettings(partitions=settings.partitions, declare=settings.bus_declare,
                                       replicas=settings.stream_replicas)
        self.runtime: ControllerRuntime | None = None
        self.outcomes: OutcomeTracker | None = None
        self.context: ReconcilerContext | None = None
        self._nc: NATS | None = None
        self._store: StateStore | None = None
        self._exporter: kuberay.KubeRayExporter | None = None

    async def start(self) -> None:
        # Reconnect forever: a NATS restart must not kill the replica (JetStream keeps state).
        self._nc = await connect_nats(self.settings.nats_url, self.settings.auth, max_reconnect_attempts=-1,
                                      name=f"{self.settings.service}-{self.settings.replica_id}")
        await ensure_streams(self._nc.jetstream(), self._bus)  # before anything subscribes
        self._store = StateStore(redis_client(self.settings.redis_url, self.settings.auth))
        cache = ObjectCache(self._nc, kinds=self._kinds, dashboard=self._dashboard,
                            dashboard_results=self._controller if self._dashboard else None,
                            scopes=self._scopes)
        self.outcomes = OutcomeTracker(self._nc, self._controller)
        published = PublishedBatches()
        ledger = await BatchLedger.open(self._nc.jetstream(), declare=self._bus.declare, replicas=self._bus.replicas)
        ctx = ReconcilerContext(nc=self._nc, cache=cache, store=self._store,
                                controller=self._controller, settings=self.settings,
                                outcomes=self.outcomes, published=published, ledger=ledger,
                                batches=BatchResolver(tracker=self.outcomes, ledger=ledger,
                                                      published=published, controller=self._controller.value))
        self.context = ctx
        self.runtime = ControllerRuntime(self._nc, controller=self._controller,
                                         replica_id=self.settings.replica_id, cache=cache,
                                         primary_kind=self._primary, reconcile=self._make(ctx),
                                         bus=self._bus, debounce_s=self.settings.debounce_s,
                                         min_interval_s=self._min_interval_s)
        self.outcomes.queue = self.runtime  # failed commands -> rate-limited retry
        self._export_kuberay_metrics(cache, self.runtime)
        await self.outcomes.start()
        await self.prepare(ctx)
        await self.runtime.start()

    def _export_kuberay_metrics(self, cache: ObjectCache, runtime: ControllerRuntime) -> None:
        """KubeRay's kuberay_* series of the primary kind, for the partitions this replica owns
        at scrape time. Every replica records the duration transitions its cache sees; only the
        owner exports them, so a partition's new owner has them too."""
        kind = KUBERAY_KINDS.get(self._primary)
        if kind is None:
            return
        primary = self._primary
        self._exporter = kuberay.KubeRayExporter(kind, objects=lambda: cache.objects(primary),
                                                 owns=lambda ns, name: runtime.owns(
                                                     ObjectKey(namespace=ns, name=name)))
        cache.listeners.setdefault(primary.value, []).append(self._exporter.on_change)
        kuberay.register().add(self._exporter)

    async def prepare(self, ctx: ReconcilerContext) -> None:
        """Hook for controllers that need more state loaded before their first reconcile."""

    async def stop(self) -> None:
        if self._exporter is not None:
            kuberay.COLLECTOR.remove(self._exporter)
        if self.runtime is not None:
            await self.runtime.stop()
        if self.outcomes is not None:
            await self.outcomes.stop()
        if self._store is not None:
            await self._store.close()
        if self._nc is not None:
            await self._nc.drain()


def reconciler_main(service: str,
                    create_app: Callable[[ReconcilerSettings, DecisionSettings], ReconcilerApp]) -> None:
    """A reconciler process's main: flags/env -> settings -> run until SIGTERM. KubeRay reads its
    knobs (ENABLE_RANDOM_POD_DELETE, RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS, ENABLE_ZERO_DOWNTIME,
    ...) from the operator's environment; so does every reconciler, once, here at the edge, and
    passes them into pure decision code."""
    settings = load(ReconcilerSettings, service)
    serve(settings, create_app(settings, settings.decisions()), needs=("nats", "redis"))
