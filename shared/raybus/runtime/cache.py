"""The replica's snapshot of the cluster: every watched object, read from RAYBUS_OBJECTS.

Like a controller-runtime informer cache, but fed from the bus: on start an ordered consumer
delivers the last message of every object subject (the full current state), and `ready` is set
only once the cache has caught up with the stream's last sequence at start. Afterwards it follows
live updates. Triggers carry the objects-stream sequence (and kind) of their cause; `wait_for` makes a
reconcile see at least that state.

Dashboard gateway (optional, `dashboard=True` / `dashboard_results=<controller>`): the cache also
follows RAYBUS_DASHBOARD (the dashboard-poller's last observation per cluster) as pseudo-kind
"dashboard", and RAYBUS_DASHBOARD_RESULTS of one controller as pseudo-kind "dashresult", with the
same snapshot-then-live loading and per-kind sequence watermark, so a poller trigger
(cause_kind "dashboard"/"dashresult", objects_seq = that stream's sequence) works with `wait_for`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy
from nats.js.errors import NotFoundError
from opentelemetry import context as otel_context
from pydantic import ValidationError
from pydantic_core import from_json

from raybus.bus import subjects as s
from raybus.bus.envelopes import DashboardObservation, DashboardResultMessage, ObjectEvent
from raybus.bus.publish import DASHBOARD_KIND, DASHBOARD_RESULT_KIND
from raybus.decisions.dashboard_contract import ClusterObservation
from raybus.observability.tracing import exporting, extract_context

log = logging.getLogger(__name__)
CLUSTER_LABEL = "ray.io/cluster"

Key = tuple[str, str, str]  # kind, namespace, name
# Ordered consumers' idle heartbeat (nats-py's default is 5 s): one that misses two is reset, so
# a consumer whose NATS node died resumes within ~2x this instead of ~10 s.
IDLE_HEARTBEAT_S = 1.0
RESULTS_KEPT_PER_OWNER = 32  # recent command results per owner (the stream keeps the last one)


class ObjectCache:
    def __init__(self, nc: NATS, *, kinds: list[s.Kind], dashboard: bool = False,
                 dashboard_results: s.Controller | None = None,
                 scopes: dict[s.Kind, str] | None = None) -> None:
        self._nc = nc
        self._kinds = {k.value for k in kinds}
        # kind -> the one subject scope followed (subjects.object_subject); absent: every scope.
        self._scopes = {k.value: scope for k, scope in (scopes or {}).items()}
        # pseudo-kind -> stream filter; see the module docstring
        self._pseudo: dict[str, str] = {}
        if dashboard:
            self._pseudo[DASHBOARD_KIND] = s.dashboard_filter()
        if dashboard_results is not None:
            self._pseudo[DASHBOARD_RESULT_KIND] = s.dashboard_results_filter(dashboard_results)
        self._observations: dict[tuple[str, str], DashboardObservation] = {}
        self._results: dict[tuple[str, str], dict[str, DashboardResultMessage]] = defaultdict(dict)
        self._objects: dict[Key, dict[str, Any]] = {}
        # ray.io/cluster label index: (kind, namespace, cluster) -> names, for "pods of a cluster"
        self._by_cluster: dict[tuple[str, str, str], set[str]] = defaultdict(set)
        # ownerReferences index: (kind, namespace, owner kind, owner name) -> names
        self._by_owner: dict[tuple[str, str, str, str], set[str]] = defaultdict(set)
        self.last_seq = 0
        self._last_seq_by_kind: dict[str, int] = {}
        self.ready = asyncio.Event()
        self._progress = asyncio.Condition()
        self._subs: list[Any] = []
        self._catching_up: list[asyncio.Event] = []
        self._seen: set[str] = set()
        self._rv_watermark: dict[str, int] = {}
        self._at: dict[Key, tuple[str, int]] = {}  # object -> (its subject, seq of the copy held)
        self.scopes: dict[Key, str] = {}  # objects published under a scope other than "_"
        # kind -> called with (old, new) for every applied event (new None: deleted); e.g. the
        # kuberay_* duration gauges, set on the status transitions the watcher publishes
        self.listeners: dict[str, list[Callable[[dict[str, Any] | None, dict[str, Any] | None], None]]] = {}

    async def start(self) -> None:
        """Subscribe per kind (a reconciler never decodes kinds it doesn't need) and return once
        every subscription has delivered the last message it had at start (num_pending == 0)."""
        js = self._nc.jetstream()
        for kind in sorted(self._kinds):
            caught_up = asyncio.Event()
            self._catching_up.append(caught_up)
            sub = await js.subscribe(
                s.objects_filter(kind, self._scopes.get(kind)), ordered_consumer=True,
                cb=self._make_cb(kind, caught_up), deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
                idle_heartbeat=IDLE_HEARTBEAT_S,
            )
            self._subs.append(sub)
            info = await sub.consumer_info()
            # Nothing of this kind to deliver, and nothing delivered but not yet applied. (The
            # consumer's delivered sequence is no help here: with other kinds in the stream it
            # starts past zero even when no message of this kind exists.)
            if (info.num_pending or 0) == 0 and sub.pending_msgs == 0 and kind not in self._seen:
                caught_up.set()
        for pseudo, subject_filter in sorted(self._pseudo.items()):
            caught_up = asyncio.Event()
            self._catching_up.append(caught_up)
            sub = await js.subscribe(
                subject_filter, ordered_consumer=True, cb=self._make_cb(pseudo, caught_up),
                deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
            )
            self._subs.append(sub)
            info = await sub.consumer_info()
            if (info.num_pending or 0) == 0 and sub.pending_msgs == 0 and pseudo not in self._seen:
                caught_up.set()
        await asyncio.gather(*(e.wait() for e in self._catching_up))
        self.ready.set()
        log.info("snapshot loaded", extra={"objects": len(self._objects), "seq": self.last_seq})

    async def stop(self) -> None:
        for sub in self._subs:
            await sub.unsubscribe()

    def _make_cb(self, kind: str, caught_up: asyncio.Event) -> Callable[[Msg], Awaitable[None]]:
        async def on_msg(msg: Msg) -> None:
            await self._on_msg(kind, msg)
            if msg.metadata is not None and msg.metadata.num_pending == 0:
                caught_up.set()
        return on_msg

    async def _on_msg(self, kind: str, msg: Msg) -> None:
        self._seen.add(kind)
        if kind in self._pseudo:
            await self._on_dashboard_msg(kind, msg)
            return
        try:
            # Parsed by pydantic-core's JSON parser, then validated as Python objects: the same
            # checks (str/Literal/dict fields only), a quarter less CPU than model_validate_json
            # on a Pod, and this runs for every object event every replica follows.
            event = ObjectEvent.model_validate(from_json(msg.data))
        except ValueError:  # invalid JSON, or a ValidationError (a ValueError too)
            log.warning("undecodable object event skipped", extra={"subject": msg.subject})
            return
        if exporting():
            # The event's trace context is current while it is applied: a wake it causes
            # (ControllerRuntime.wake) links the reconcile to the watcher's publish.
            token = otel_context.attach(extract_context(msg.headers))
            try:
                self.apply(event)
            finally:
                otel_context.detach(token)
        else:
            self.apply(event)
        seq = msg.metadata.sequence.stream if msg.metadata else 0
        where = (event.kind, event.key.namespace, event.key.name)
        if event.type == "DELETED":
            self._at.pop(where, None)
        else:
            self._at[where] = (msg.subject, seq)
        # Each kind's ordered consumer delivers in stream order, so per kind the highest applied
        # seq is a watermark: everything of that kind up to it is in the cache.
        async with self._progress:
            self._last_seq_by_kind[kind] = max(self._last_seq_by_kind.get(kind, 0), seq)
            self.last_seq = max(self.last_seq, seq)
            self._progress.notify_all()

    async def _on_dashboard_msg(self, kind: str, msg: Msg) -> None:
        try:
            if kind == DASHBOARD_KIND:
                obs = DashboardObservation.model_validate_json(msg.data)
                self._observations[(obs.key.namespace, obs.key.name)] = obs
            else:
                res = DashboardResultMessage.model_validate_json(msg.data)
                recent = self._results[(res.key.namespace, res.key.name)]
                recent.pop(res.result.command_id, None)
                recent[res.result.command_id] = res
                while len(recent) > RESULTS_KEPT_PER_OWNER:
                    recent.pop(next(iter(recent)))
        except ValidationError:
            log.warning("undecodable dashboard message skipped", extra={"subject": msg.subject})
            return
        seq = msg.metadata.sequence.stream if msg.metadata else 0
        async with self._progress:  # watermark of that stream only, never the objects' last_seq
            self._last_seq_by_kind[kind] = max(self._last_seq_by_kind.get(kind, 0), seq)
            self._progress.notify_all()

    def dashboard(self, namespace: str, cluster: str) -> ClusterObservation | None:
        """The dashboard-poller's last observation of a RayCluster (needs `dashboard=True`)."""
        obs = self._observations.get((namespace, cluster))
        return obs.observation if obs is not None else None

    def dashboard_message(self, namespace: str, cluster: str) -> DashboardObservation | None:
        """The same with its envelope (observed_at)."""
        return self._observations.get((namespace, cluster))

    def dashboard_results(self, namespace: str, owner: str) -> list[DashboardResultMessage]:
        """Recent command results of one owner, oldest first (needs `dashboard_results=`). After a
        restart only the last one per owner is known (the stream keeps one per subject)."""
        return list(self._results.get((namespace, owner), {}).values())

    def dashboard_result(self, namespace: str, owner: str, command_id: str) -> DashboardResultMessage | None:
        return self._results.get((namespace, owner), {}).get(command_id)

    def apply(self, event: ObjectEvent) -> None:
        if event.kind not in self._kinds:
            return
        if event.type != "SYNC" and event.resource_version and event.resource_version.isdigit():
            # Watch events reach the watcher in resourceVersion order and it publishes them in
            # that order, so the highest one applied is a watermark: every change of this kind up
            # to it is in the cache. (Relist SYNC events come in key order, not rv order: they
            # never move it.) Expectations use it to tell "not seen yet" from "gone".
            rv = int(event.resource_version)
            if rv > self._rv_watermark.get(event.kind, 0):
                self._rv_watermark[event.kind] = rv
        key = (event.kind, event.key.namespace, event.key.name)
        old = self._objects.get(key)
        if old is not None:
            self._unindex(key, old)
        if event.type == "DELETED":
            self._objects.pop(key, None)
            self.scopes.pop(key, None)
            self._notify(event.kind, old or event.object, None)
            return
        self._objects[key] = event.object
        self._notify(event.kind, old, event.object)
        if event.scope != s.NO_SCOPE:
            self.scopes[key] = event.scope  # the subject scope it was published under
        else:
            self.scopes.pop(key, None)
        cluster = (event.object.get("metadata", {}).get("labels") or {}).get(CLUSTER_LABEL)
        if cluster:
            self._by_cluster[(event.kind, event.key.namespace, cluster)].add(event.key.name)
        for ref in event.object.get("metadata", {}).get("ownerReferences") or []:
            self._by_owner[(event.kind, event.key.namespace, ref.get("kind", ""),
                            ref.get("name", ""))].add(event.key.name)

    def _notify(self, kind: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        for listener in self.listeners.get(kind, ()):
            try:
                listener(old, new)
            except Exception:  # a metrics hook must never stop the cache
                log.exception("cache listener failed")

    def _unindex(self, key: Key, obj: dict[str, Any]) -> None:
        cluster = (obj.get("metadata", {}).get("labels") or {}).get(CLUSTER_LABEL)
        if cluster:
            self._by_cluster[(key[0], key[1], cluster)].discard(key[2])
        for ref in obj.get("metadata", {}).get("ownerReferences") or []:
            self._by_owner[(key[0], key[1], ref.get("kind", ""), ref.get("name", ""))].discard(key[2])

    def rv_watermark(self, kind: s.Kind) -> int | None:
        """Highest resourceVersion of a `kind` watch event applied (None: none seen yet)."""
        return self._rv_watermark.get(kind.value)

    def applied(self, kind: str) -> int:
        return self._last_seq_by_kind.get(kind, 0)

    async def wait_for(self, seq: int, *, kind: str, timeout: float | None = 5.0, scope: str = "") -> bool:
        """Wait until this cache holds the `kind` object at objects-stream `seq` (or newer).
        A kind (or a scope of it) the cache does not follow is not part of its snapshot: nothing
        to wait for."""
        if (kind not in self._kinds and kind not in self._pseudo) or self.applied(kind) >= seq:
            return True
        if scope and kind in self._scopes and self._scopes[kind] != scope:
            return True
        async with self._progress:
            try:
                await asyncio.wait_for(
                    self._progress.wait_for(lambda: self.applied(kind) >= seq), timeout)
            except TimeoutError:
                return False
        return True

    def held_seq(self, kind: s.Kind, namespace: str, name: str) -> int:
        """Objects-stream sequence of the copy of that object the cache holds (0: none seen)."""
        at = self._at.get((kind.value, namespace, name))
        return at[1] if at is not None else 0

    async def is_latest(self, kind: s.Kind, namespace: str, name: str, seq: int, *,
                        timeout: float = 5.0) -> bool:
        """Is the copy at `seq` still the stream's last for that object? One request to NATS.
        False when the stream holds a newer one (waited for, up to `timeout`, so a reconcile
        started after this sees it): a decision made on the older copy must not be published.
        Each kind has its own ordered consumer, and one whose NATS node died stalls until its
        heartbeat check resets it, while the others go on: a RayCluster's deletion can be held
        back that way while the GC's Pod deletions arrive, and each "0 head Pods" would create
        another head for the deleted RayCluster (each removed by the GC in turn)."""
        at = self._at.get((kind.value, namespace, name))
        if at is None:
            return True
        try:
            last = await self._nc.jetstream().get_last_msg(s.STREAM_OBJECTS, at[0])
        except NotFoundError:
            return True
        if (last.seq or 0) <= seq:
            return True
        await self.wait_for(last.seq or 0, kind=kind.value, timeout=timeout)
        return False

    def get(self, kind: s.Kind, namespace: str, name: str) -> dict[str, Any] | None:
        return self._objects.get((kind.value, namespace, name))

    def objects(self, kind: s.Kind, namespace: str | None = None) -> list[dict[str, Any]]:
        # list(): one C-level copy under the GIL, so the metrics server's scrape thread may call this
        return [o for (k, ns, _), o in list(self._objects.items())
                if k == kind.value and (namespace is None or ns == namespace)]

    def keys(self, kind: s.Kind) -> list[tuple[str, str]]:
        return [(ns, name) for (k, ns, name) in self._objects if k == kind.value]

    def owned_by(self, kind: s.Kind, namespace: str, *, owner_kind: str,
                 owner_name: str) -> list[dict[str, Any]]:
        names = self._by_owner.get((kind.value, namespace, owner_kind, owner_name), set())
        return [self._objects[(kind.value, namespace, n)] for n in sorted(names)
                if (kind.value, namespace, n) in self._objects]

    def labelled(self, kind: s.Kind, namespace: str, cluster: str) -> list[dict[str, Any]]:
        names = self._by_cluster.get((kind.value, namespace, cluster), set())
        return [self._objects[(kind.value, namespace, n)] for n in sorted(names)
                if (kind.value, namespace, n) in self._objects]


def union_by_name(*groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Objects from several cache lookups (owned, labelled, by name), each name once: the first wins."""
    seen: dict[str, dict[str, Any]] = {}
    for group in groups:
        for obj in group:
            seen.setdefault(str((obj.get("metadata") or {}).get("name") or ""), obj)
    return list(seen.values())
