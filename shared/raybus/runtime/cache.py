"""The replica's snapshot of the cluster: every watched object, read from RAYBUS_OBJECTS.

Like a controller-runtime informer cache, but fed from the bus: on start an ordered consumer
delivers the last message of every object subject (the full current state), and `ready` is set
only once the cache has caught up with the stream's last sequence at start. Afterwards it follows
live updates. Triggers carry the objects-stream sequence (and kind) of their cause; `wait_for` makes a
reconcile see at least that state.
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
from pydantic import ValidationError

from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectEvent

log = logging.getLogger(__name__)
CLUSTER_LABEL = "ray.io/cluster"

Key = tuple[str, str, str]  # kind, namespace, name


class ObjectCache:
    def __init__(self, nc: NATS, *, kinds: list[s.Kind]) -> None:
        self._nc = nc
        self._kinds = {k.value for k in kinds}
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

    async def start(self) -> None:
        """Subscribe per kind (a reconciler never decodes kinds it doesn't need) and return once
        every subscription has delivered the last message it had at start (num_pending == 0)."""
        js = self._nc.jetstream()
        for kind in sorted(self._kinds):
            caught_up = asyncio.Event()
            self._catching_up.append(caught_up)
            sub = await js.subscribe(
                s.objects_filter(kind), ordered_consumer=True, cb=self._make_cb(kind, caught_up),
                deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
            )
            self._subs.append(sub)
            info = await sub.consumer_info()
            # Nothing of this kind to deliver, and nothing delivered but not yet applied. (The
            # consumer's delivered sequence is no help here: with other kinds in the stream it
            # starts past zero even when no message of this kind exists.)
            if (info.num_pending or 0) == 0 and sub.pending_msgs == 0 and kind not in self._seen:
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
        try:
            event = ObjectEvent.model_validate_json(msg.data)
        except ValidationError:
            log.warning("undecodable object event skipped", extra={"subject": msg.subject})
            return
        self.apply(event)
        seq = msg.metadata.sequence.stream if msg.metadata else 0
        # Each kind's ordered consumer delivers in stream order, so per kind the highest applied
        # seq is a watermark: everything of that kind up to it is in the cache.
        async with self._progress:
            self._last_seq_by_kind[kind] = max(self._last_seq_by_kind.get(kind, 0), seq)
            self.last_seq = max(self.last_seq, seq)
            self._progress.notify_all()

    def apply(self, event: ObjectEvent) -> None:
        if event.kind not in self._kinds:
            return
        key = (event.kind, event.key.namespace, event.key.name)
        old = self._objects.get(key)
        if old is not None:
            self._unindex(key, old)
        if event.type == "DELETED":
            self._objects.pop(key, None)
            return
        self._objects[key] = event.object
        cluster = (event.object.get("metadata", {}).get("labels") or {}).get(CLUSTER_LABEL)
        if cluster:
            self._by_cluster[(event.kind, event.key.namespace, cluster)].add(event.key.name)
        for ref in event.object.get("metadata", {}).get("ownerReferences") or []:
            self._by_owner[(event.kind, event.key.namespace, ref.get("kind", ""),
                            ref.get("name", ""))].add(event.key.name)

    def _unindex(self, key: Key, obj: dict[str, Any]) -> None:
        cluster = (obj.get("metadata", {}).get("labels") or {}).get(CLUSTER_LABEL)
        if cluster:
            self._by_cluster[(key[0], key[1], cluster)].discard(key[2])
        for ref in obj.get("metadata", {}).get("ownerReferences") or []:
            self._by_owner[(key[0], key[1], ref.get("kind", ""), ref.get("name", ""))].discard(key[2])

    def applied(self, kind: str) -> int:
        return self._last_seq_by_kind.get(kind, 0)

    async def wait_for(self, seq: int, *, kind: str, timeout: float | None = 5.0) -> bool:
        """Wait until this cache holds the `kind` object at objects-stream `seq` (or newer).
        A kind the cache does not follow is not part of its snapshot: nothing to wait for."""
        if kind not in self._kinds or self.applied(kind) >= seq:
            return True
        async with self._progress:
            try:
                await asyncio.wait_for(
                    self._progress.wait_for(lambda: self.applied(kind) >= seq), timeout)
            except TimeoutError:
                return False
        return True

    def get(self, kind: s.Kind, namespace: str, name: str) -> dict[str, Any] | None:
        return self._objects.get((kind.value, namespace, name))

    def objects(self, kind: s.Kind, namespace: str | None = None) -> list[dict[str, Any]]:
        return [o for (k, ns, _), o in self._objects.items()
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
