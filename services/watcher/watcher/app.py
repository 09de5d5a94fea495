"""The watcher: the only component that lists/watches Kubernetes (read-only RBAC).

For every change of a watched object it publishes an ObjectEvent (RAYBUS_OBJECTS keeps the last
one per object, so the stream is the cluster state every reconciler loads) and then a Trigger for
each controller that owns the object (watcher.routing). The trigger carries the event's stream
sequence, so the reconciler decides on a snapshot at least that fresh.

Restart safety: on start the watcher reads back what it last published from RAYBUS_OBJECTS, so its
first list publishes only real differences (and DELETED for objects that vanished while it was
down) instead of re-announcing the whole cluster. Two replicas may run; Nats-Msg-Id
kind/ns/name/resourceVersion makes JetStream store each version once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, cast

from nats.aio.client import Client as NATS
from opentelemetry import context as otel_context
from opentelemetry import trace
from pydantic import AliasChoices, Field

from raybus.adapters.informer import PUBLISH_WINDOW, Informer, Reconnect, meta, watch_namespaces
from raybus.adapters.kube import KubeClient, new_api_client, rate_limiter
from raybus.bus import subjects as s
from raybus.bus.connect import connect_nats
from raybus.bus.envelopes import ObjectEvent, ObjectKey
from raybus.bus.publish import publish_object, publish_trigger
from raybus.bus.streams import BusSettings, ensure_streams
from raybus.observability import busstate
from raybus.observability.metrics import MESSAGES
from raybus.runtime.cache import ObjectCache
from raybus.runtime.settings import NOT_A_FLAG, CommonSettings, KubeSettings
from raybus.runtime.tasks import cancel_and_wait
from watcher.optional import served
from watcher.routing import (
    SERVICE_NAME_LABEL,
    WATCHES,
    Route,
    WatchSpec,
    batch_scheduler_watches,
    cluster_owner,
    msg_id,
    only_cluster_decisions_read,
    pod_update_matters,
    routes,
    sanitize,
    scope_of,
    self_update_matters,
    woken_by_their_cache,
)

log = logging.getLogger(__name__)
tracer = trace.get_tracer("raybus.watcher")
Json = dict[str, Any]
SERVICE = "watcher"


class WatcherSettings(KubeSettings):
    service: str = Field(default=SERVICE, json_schema_extra=NOT_A_FLAG)
    resync_s: float = Field(default=600.0, description="periodic relist: the safety net for anything a watch missed")
    watch_timeout_s: int = Field(default=300, description="a watch's timeout (client-go's minWatchTimeout)")
    namespace: str | None = Field(default=None, validation_alias=AliasChoices("namespace", "RAYBUS_WATCH_NAMESPACE"),
                                  description="namespaces to watch, comma-separated (KubeRay's --watch-namespace); "
                                  "default all")
    batch_scheduler: str = Field(default="", description="the operator's --batch-scheduler: also watch its PodGroups")
    discovery_s: float = Field(default=30.0, description="how often API discovery is read for optional kinds "
                               "(Gateway API, PodGroups)")
    publish_window: int = Field(default=PUBLISH_WINDOW, description="watch-event publishes in flight per kind; "
                                "1: every event of a kind strictly in order")
    bus_state_s: float = Field(default=10.0, description="how often the bus's stream/consumer state is read "
                               "for /metrics (0: never)")


class Watcher:
    def __init__(self, settings: WatcherSettings, *, kube: KubeClient | None = None,
                 specs: tuple[WatchSpec, ...] = WATCHES) -> None:
        self.settings = settings
        self._kube = kube
        self._specs = specs
        self._nc: NATS | None = None
        self.informers: list[Informer] = []
        self._reconnect = Reconnect()  # one API server for all informers (informer.Reconnect)
        self._tasks: list[asyncio.Task[None]] = []  # one per informer, same index
        self._discovery: asyncio.Task[None] | None = None
        self._bus_state: busstate.BusState | None = None
        self._bus_state_task: asyncio.Task[None] | None = None
        self._known: dict[s.Kind, dict[tuple[str, str], Json]] = {}
        # Service -> controllers owning it, so EndpointSlices (labelled with their Service's name)
        # reach the RayService/RayCluster that owns the Service.
        self.service_owners: dict[tuple[str, str], tuple[Route, ...]] = {}
        # (kind, namespace, name) -> the subject scope it was last published under: its deletion
        # (and a move to another scope) must reach that subject, not the one computed now.
        self.scopes: dict[tuple[str, str, str], str] = {}
        # RayCluster -> the RayJob/RayService owning it, so its head Pods also wake the RayService.
        self.cluster_owners: dict[tuple[str, str], Route] = {}
        # Slices seen before their Service, replayed when the Service becomes known.
        self._orphan_slices: dict[tuple[str, str], dict[str, Json]] = defaultdict(dict)
        self.published = 0
        # Trigger publishes still waiting for their JetStream acks (see _publish).
        self._triggering: set[asyncio.Task[None]] = set()
        # (target, kind, scope) -> None: a trigger is in flight; _Waiting: and a newer change
        self._trigger_waiting: dict[tuple[Route, str, str], _Waiting | None] = {}

    @property
    def nc(self) -> NATS:
        assert self._nc is not None
        return self._nc

    async def start(self) -> None:
        self._nc = await connect_nats(self.settings.nats_url, self.settings.auth,
                                      name=f"watcher-{self.settings.replica_id}",
                                      max_reconnect_attempts=-1)
        await ensure_streams(self.nc.jetstream(), BusSettings(partitions=self.settings.partitions,
                                                                 declare=self.settings.bus_declare,
                                                                 replicas=self.settings.stream_replicas))
        if self.settings.bus_state_s > 0:
            self._bus_state = busstate.BusState(self.nc, interval_s=self.settings.bus_state_s)
            busstate.export(self._bus_state)
            self._bus_state_task = asyncio.create_task(self._bus_state.run())
        if self._kube is None:
            api = await new_api_client(self.settings.kubeconfig)
            self._kube = KubeClient(api, limiter=rate_limiter(self.settings.kube_qps,
                                                              self.settings.kube_burst))
        known = self._known = await self._load_published()
        optional = [spec for spec in self._specs if spec.optional]
        available = await served(self._kube, optional)
        for spec in self._specs:
            if not spec.optional or available[spec]:
                self.informers += self._informers(spec)
            else:
                log.info("optional kind not served by the API server; watched once discovery shows it",
                         extra={"kind": spec.kind.value, "api_version": spec.api_version})
        for obj in known.get(s.Kind.RAYCLUSTER, {}).values():
            self._remember_cluster(obj, deleted=False)
        for obj in known[s.Kind.SERVICE].values():
            self._remember_service(obj, deleted=False)
        self._tasks = [asyncio.create_task(self._run(inf, after=self.informers[i - 1] if i else None))
                       for i, inf in enumerate(self.informers)]
        if optional:
            self._discovery = asyncio.create_task(self._watch_discovery(optional))

    def _informers(self, spec: WatchSpec) -> list[Informer]:
        """One per watched namespace (a namespaced install's Roles allow nothing wider), sharing
        the kind's known objects."""
        assert self._kube is not None
        return [Informer(self._kube, spec, sink=self._sink_for(spec), known=self._known[spec.kind],
                         transform=sanitize, namespace=ns,
                         resync_s=self.settings.resync_s, watch_timeout_s=self.settings.watch_timeout_s,
                         reconnect=self._reconnect, window=self.settings.publish_window)
                for ns in watch_namespaces(self.settings.namespace)]

    async def _watch_discovery(self, optional: list[WatchSpec]) -> None:
        """Start an optional kind's informer when discovery shows it, stop it when it goes."""
        assert self._kube is not None
        while True:
            await asyncio.sleep(self.settings.discovery_s)
            try:
                available = await served(self._kube, optional)
            except Exception:  # look again next interval
                log.exception("discovery failed")
                continue
            for spec, now in available.items():
                watching = any(inf.spec == spec for inf in self.informers)
                if now and not watching:
                    log.info("optional kind now served, watching it",
                             extra={"kind": spec.kind.value, "api_version": spec.api_version})
                    for inf in self._informers(spec):
                        self.informers.append(inf)
                        self._tasks.append(asyncio.create_task(self._run(inf, after=None)))
                elif now is False and watching:
                    log.info("optional kind no longer served, stopped watching it",
                             extra={"kind": spec.kind.value, "api_version": spec.api_version})
                    while (index := next((i for i, inf in enumerate(self.informers) if inf.spec == spec),
                                         None)) is not None:
                        inf = self.informers.pop(index)
                        await cancel_and_wait([self._tasks.pop(index)])
                        await inf.retract_all()

    async def _run(self, inf: Informer, *, after: Informer | None) -> None:
        # Initial lists in WATCHES order (Services before EndpointSlices) like WaitForCacheSync,
        # then every kind watches concurrently. A kind whose list fails (a ray.io CRD not
        # installed yet) must not hold up the others: it keeps retrying in run() with backoff.
        if after is not None:
            await after.attempted.wait()
        try:
            await inf.relist(why="initial")
        except Exception as exc:  # noqa: BLE001 - retried by run()
            log.warning("initial list failed", extra={"kind": inf.spec.name, "error": str(exc)})
        await inf.run()

    async def wait_synced(self, timeout: float = 30.0) -> None:
        await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in self.informers)), timeout)

    async def stop(self) -> None:
        if self._bus_state_task is not None:
            await cancel_and_wait([self._bus_state_task])
            self._bus_state_task = None
        if self._bus_state is not None:
            busstate.unexport(self._bus_state)
        if self._discovery is not None:
            await cancel_and_wait([self._discovery])
            self._discovery = None
        await cancel_and_wait(self._tasks)
        self._tasks.clear()
        # The watch events already handed to NATS: let them land (and trigger) before the
        # connection goes; a publish still failing after the deadline is dropped, and the next
        # watcher's first list publishes it (it diffs against what the stream holds).
        await asyncio.gather(*(inf.drain(timeout=5.0) for inf in self.informers))
        if self._triggering:  # let the last triggers reach the stream before the connection goes
            await asyncio.wait(set(self._triggering), timeout=5.0)
        if self._kube is not None:
            await self._kube.close()
        if self._nc is not None:
            with contextlib.suppress(Exception):
                await self._nc.drain()

    async def _load_published(self) -> dict[s.Kind, dict[tuple[str, str], Json]]:
        kinds = [spec.kind for spec in self._specs]
        cache = ObjectCache(self.nc, kinds=kinds)
        await cache.start()
        await cache.stop()
        self.scopes.update(cache.scopes)
        out: dict[s.Kind, dict[tuple[str, str], Json]] = {}
        for kind in kinds:
            # Scoped to --namespace: another watcher may own the other namespaces' objects, which
            # this one's lists would otherwise report as vanished.
            out[kind] = {(str(meta(o).get("namespace") or ""), str(meta(o).get("name") or "")): o
                         for ns in watch_namespaces(self.settings.namespace) for o in cache.objects(kind, ns)}
        log.info("loaded last published state", extra={"objects": sum(map(len, out.values()))})
        return out

    def _sink_for(self, spec: WatchSpec) -> Any:
        async def sink(etype: str, obj: Json, old: Json | None) -> bool:
            return await self.on_change(spec, etype, obj, old=old)
        return sink

    def _remember_cluster(self, obj: Json, *, deleted: bool) -> None:
        m = meta(obj)
        key = (str(m.get("namespace") or ""), str(m.get("name") or ""))
        owner = None if deleted else cluster_owner(obj)
        if owner is not None:
            self.cluster_owners[key] = owner
        else:
            self.cluster_owners.pop(key, None)

    def _remember_service(self, obj: Json, *, deleted: bool) -> tuple[Route, ...]:
        m = meta(obj)
        key = (str(m.get("namespace") or ""), str(m.get("name") or ""))
        owners = () if deleted else routes(s.Kind.SERVICE, obj, service_owners={})
        if owners:
            self.service_owners[key] = owners
        else:
            self.service_owners.pop(key, None)
        return owners

    async def on_change(self, spec: WatchSpec, etype: str, obj: Json, *, old: Json | None) -> bool:
        """Publish one change; returns whether the object is tracked (published) afterwards."""
        # obj and old come sanitized (routing.sanitize, no Secret values, slim Pods): the
        # informers apply it to every object before the sink and keep that copy as the next
        # one's `old`, so a Pod update is compared on what the bus carries.
        kind = spec.kind
        if kind is s.Kind.RAYCLUSTER:
            self._remember_cluster(obj, deleted=etype == "DELETED")
        targets = routes(kind, obj, service_owners=self.service_owners, cluster_owners=self.cluster_owners)
        if kind is s.Kind.ENDPOINTSLICE:
            self._park_slice(obj, deleted=etype == "DELETED", routed=bool(targets))
        if spec.owned_only and not targets and etype != "DELETED":
            if old is None:
                return False
            # Was ours, no longer owned by anything raybus reconciles: retract it from the bus.
            etype, obj = "DELETED", old
        if old is not None:  # an ownership/label change must wake the previous owner too
            targets = tuple(dict.fromkeys(targets + routes(kind, old, service_owners=self.service_owners,
                                                           cluster_owners=self.cluster_owners)))
        if etype != "DELETED" and not self_update_matters(kind, old, obj):
            m = meta(obj)
            targets = tuple(r for r in targets if not (r.kind is kind and r.namespace == m.get("namespace")
                                                       and r.name == m.get("name")))
        if etype == "MODIFIED" and not pod_update_matters(kind, old, obj):
            if only_cluster_decisions_read(kind, obj):
                # Not published at all: the bus keeps the version before it, equal in all its
                # readers read (routing.only_cluster_decisions_read), and the informer keeps this
                # one as the next update's `old`, so the next change is measured from here.
                return True
            targets = tuple(r for r in targets if r.controller is not s.Controller.CLUSTER)
        targets = woken_by_their_cache(kind, targets, obj, old)
        await self._publish(kind, etype, obj, targets=targets, old=old)
        if kind is s.Kind.SERVICE:
            before = set(self.service_owners)
            self._remember_service(obj, deleted=etype == "DELETED")
            m = meta(obj)
            key = (str(m.get("namespace") or ""), str(m.get("name") or ""))
            if key in self.service_owners and key not in before:
                await self._replay_slices(key)
        return etype != "DELETED"

    def _park_slice(self, obj: Json, *, deleted: bool, routed: bool) -> None:
        m = meta(obj)
        service = (m.get("labels") or {}).get(SERVICE_NAME_LABEL)
        if not service:
            return
        key = (str(m.get("namespace") or ""), str(service))
        if deleted or routed:
            self._orphan_slices.get(key, {}).pop(str(m.get("name")), None)
        else:
            self._orphan_slices[key][str(m.get("name"))] = obj

    async def _replay_slices(self, service_key: tuple[str, str]) -> None:
        slice_informer = next((i for i in self.informers if cast(WatchSpec, i.spec).kind is s.Kind.ENDPOINTSLICE), None)
        if slice_informer is None:
            return
        for obj in list(self._orphan_slices.pop(service_key, {}).values()):
            slice_informer.known[(service_key[0], str(meta(obj).get("name")))] = obj
            await self.on_change(cast(WatchSpec, slice_informer.spec), "ADDED", obj, old=None)

    async def _publish(self, kind: s.Kind, etype: str, obj: Json, *, targets: tuple[Route, ...],
                       old: Json | None = None) -> None:
        js = self.nc.jetstream()
        m = meta(obj)
        key = ObjectKey(namespace=str(m.get("namespace") or ""), name=str(m.get("name") or ""))
        where = (kind.value, key.namespace, key.name)
        published = self.scopes.get(where)
        if etype == "DELETED":
            scope = published or scope_of(kind, obj, cluster_owners=self.cluster_owners)
            self.scopes.pop(where, None)
        else:
            scope = scope_of(kind, obj, cluster_owners=self.cluster_owners)
            if published is not None and published != scope:
                # Its subject changes: retract the copy under the old one (last value per subject).
                await publish_object(js, ObjectEvent(
                    key=key, kind=kind.value, type="DELETED", scope=published, uid=m.get("uid"),
                    resource_version=m.get("resourceVersion"), object=old or obj),
                    msg_id=f"{msg_id(kind, obj, event_type='DELETED')}/{published}")
            self.scopes[where] = scope
        event = ObjectEvent(key=key, kind=kind.value, type=etype, scope=scope,
                            uid=m.get("uid"), resource_version=m.get("resourceVersion"), object=obj)
        cause = f"{etype} {kind.value} {key}"
        # The trace starts here: every reconcile and API write this change causes joins it.
        with tracer.start_as_current_span("watch-event", attributes={"raybus.cause": cause}):
            seq = await publish_object(js, event, msg_id=msg_id(kind, obj, event_type=etype))
            # One trigger in flight per (target, kind, scope): a change while one is on its way
            # only leaves the newest (seq, cause) waiting, published once that one is acked
            # (_follow_up). The reconcile that trigger starts waits for the newest seq, so it
            # sees every change folded into it; the trigger stream would keep only one of them
            # pending anyway (1 per subject). Per kind and scope, because the cache applies
            # each kind's (and scope's) events on its own consumer.
            fresh: list[Route] = []
            for r in targets:
                waiting = (r, kind.value, scope)
                if waiting in self._trigger_waiting:
                    # Pipelined publishes (informer) may be acked out of order: the follow-up
                    # carries the newest sequence seen, which covers every older change.
                    newest = self._trigger_waiting[waiting]
                    if newest is None or newest.seq < seq:
                        self._trigger_waiting[waiting] = _Waiting(seq, cause, otel_context.get_current())
                else:
                    self._trigger_waiting[waiting] = None
                    fresh.append(r)
            if fresh:
                # The triggers' acks are not waited for here: the next event's object publish
                # goes out meanwhile (one flush, one round trip for both), instead of one round
                # trip per message. Each trigger still carries `seq`, so the order in which they
                # land does not matter; a failed one is retried (_send_triggers), and at most
                # MAX_TRIGGERING are in flight.
                task = asyncio.create_task(self._trigger(js, tuple(fresh), cause=cause, seq=seq,
                                                         kind=kind, scope=scope))
                self._triggering.add(task)
                task.add_done_callback(self._triggering.discard)
                if len(self._triggering) >= MAX_TRIGGERING:
                    await asyncio.wait(set(self._triggering), return_when=asyncio.FIRST_COMPLETED)
        self.published += 1
        MESSAGES.labels(SERVICE, kind.value, etype.lower()).inc()


    async def _trigger(self, js: Any, targets: tuple[Route, ...], *, cause: str, seq: int,
                       kind: s.Kind, scope: str) -> None:
        await self._send_triggers(js, targets, cause=cause, seq=seq, kind=kind, scope=scope)
        await asyncio.gather(*(self._follow_up(js, r, kind=kind, scope=scope) for r in targets))

    async def _follow_up(self, js: Any, r: Route, *, kind: s.Kind, scope: str) -> None:
        """Publish what changed for `r` while its trigger was on the way, until nothing did."""
        waiting = (r, kind.value, scope)
        while (newest := self._trigger_waiting.get(waiting)) is not None:
            self._trigger_waiting[waiting] = None
            token = otel_context.attach(newest.ctx)  # the trace of the newest change
            try:
                await self._send_triggers(js, (r,), cause=newest.cause, seq=newest.seq,
                                          kind=kind, scope=scope)
            finally:
                otel_context.detach(token)
        self._trigger_waiting.pop(waiting, None)

    async def _send_triggers(self, js: Any, targets: tuple[Route, ...], *, cause: str, seq: int,
                             kind: s.Kind, scope: str) -> None:
        pending = list(targets)
        delay = 0.1
        while pending:
            results = await asyncio.gather(*(
                publish_trigger(js, controller=r.controller, key=ObjectKey(namespace=r.namespace, name=r.name),
                                kind=r.kind.value, cause=cause, objects_seq=seq,
                                cause_kind=kind.value, cause_scope=scope,
                                partitions=self.settings.partitions)
                for r in pending), return_exceptions=True)
            failed = [r for r, res in zip(pending, results, strict=True) if isinstance(res, BaseException)]
            if not failed:
                return
            # A trigger must not be lost (the object's stream copy does not wake anyone): retry
            # as an event's failed publish would have been retried by its informer.
            log.warning("trigger publish failed; retrying", extra={"cause": cause, "targets": len(failed),
                                                                   "error": str(next(x for x in results if isinstance(x, BaseException)))})
            pending = failed
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)


MAX_TRIGGERING = 256


@dataclass(frozen=True)
class _Waiting:
    seq: int
    cause: str
    ctx: otel_context.Context


def create_app(settings: CommonSettings) -> Watcher:
    if not isinstance(settings, WatcherSettings):
        settings = WatcherSettings(**settings.model_dump())
    return Watcher(settings, specs=WATCHES + batch_scheduler_watches(settings.batch_scheduler))
