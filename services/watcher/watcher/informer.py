"""List + watch of one kind, shaped like client-go's Reflector (tools/cache/reflector.go).

- list, then watch from the list's resourceVersion; each watch request ends after a randomized
  timeout (client-go: 5-10 min) and is resumed from the last resourceVersion seen (events and
  BOOKMARKs advance it), so an API server restart or dropped connection costs no relist;
- 410 Expired/Gone (the resourceVersion was compacted) -> relist, and the relist is diffed
  against what was last published (DeltaFIFO.Replace): vanished objects become DELETED;
- every `resync_s` a relist runs anyway, as a safety net for anything a watch might have missed;
- connection errors back off exponentially (client-go's backoff manager: 0.8s..30s), but an
  informer that reaches the API server again wakes the others sleeping on a connection error or
  a 5xx (`Reconnect`, one per watcher): they all talk to that one server.
- a failed publish to NATS is retried in place (0.1..0.5 s), never through that backoff.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential

from raybus.adapters.kube import KubeClient, KubeError, resource_for
from watcher.routing import WatchSpec, diff_relist, meta

log = logging.getLogger(__name__)
Json = dict[str, Any]
# A failed publish is retried after 0.1 s, doubling up to 0.5 s: a JetStream leader election
# takes a few seconds, and every second the watcher stays behind is a second a reconciler
# decides on objects the API server has already changed. (2 s was too coarse: in a NATS node
# restart the Pod informer's publishes got through between the RayCluster informer's retries,
# ~7 s behind, and a deleted RayCluster got a second head, chaos-short seed 1.)
PUBLISH_RETRY_S = 0.1
PUBLISH_RETRY_MAX_S = 0.5
Key = tuple[str, str]
# sink(event_type, object, previously published object or None) -> keep tracking the object?
Sink = Callable[[str, Json, Json | None], Awaitable[bool]]


class Reconnect:
    """Shared by a watcher's informers. After an API server restart each informer slept its own
    backoff: in the chaos soak the RayCluster informer, at 6.4 s after 4 failures, came back
    ~3 s after the Pod informer had relisted, and the reconciler, seeing the garbage collector
    remove a deleted RayCluster's Pods but not the deletion itself, created 3 head Pods in 2 s
    (each seen, then collected). The server being back is news for every informer."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def reached(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def sleep(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True when woken early by an informer reaching the server."""
        event = self._event
        try:
            await asyncio.wait_for(event.wait(), seconds)
        except TimeoutError:
            return False
        return True


def _key(obj: Json) -> Key:
    m = meta(obj)
    return str(m.get("namespace") or ""), str(m.get("name") or "")


class Informer:
    def __init__(self, kube: KubeClient, spec: WatchSpec, *, sink: Sink,
                 known: dict[Key, Json] | None = None, namespace: str | None = None,
                 resync_s: float = 600.0, watch_timeout_s: int = 300,
                 reconnect: Reconnect | None = None) -> None:
        self._kube = kube
        self._reconnect = reconnect or Reconnect()
        self.api_failures = 0  # failed list/watch requests (observable for tests)
        self.spec = spec
        self._res = resource_for(spec.api_version, spec.k8s_kind)
        self._sink = sink
        self.known: dict[Key, Json] = known if known is not None else {}
        self._ns = namespace
        self._resync_s = resync_s
        self._watch_timeout_s = watch_timeout_s
        self.resource_version = ""
        self._next_resync = 0.0
        self.relists = 0  # observable for tests and logs
        self.publish_failures = 0
        self.synced = asyncio.Event()
        self.attempted = asyncio.Event()  # first list tried (may have failed, e.g. CRD missing)

    async def relist(self, *, why: str) -> None:
        try:
            items, rv = await self._kube.list_all(self._res, namespace=self._ns,
                                                  label_selector=self.spec.label_selector)
        finally:
            self.attempted.set()
        self._reconnect.reached()
        changes = diff_relist(self.known, items)
        log.info("relisted", extra={"kind": self.spec.kind.value, "why": why, "items": len(items),
                                    "candidates": len(changes), "resource_version": rv})
        # A relist holds distinct objects only, so they may be published concurrently (in chunks,
        # to bound in-flight publishes); watch events stay strictly in order.
        for start in range(0, len(changes), 64):
            await asyncio.gather(*(self._apply(etype, obj) for etype, obj in changes[start:start + 64]))
        self.resource_version = rv
        self.relists += 1
        self._next_resync = time.monotonic() + self._resync_s
        self.synced.set()

    async def retract_all(self) -> None:
        """The kind is no longer served (its CRD went, and every object with it): publish DELETED
        for everything published, as a relist that found nothing would."""
        for etype, obj in diff_relist(self.known, []):
            await self._apply(etype, obj)

    async def _apply(self, etype: str, obj: Json) -> None:
        key = _key(obj)
        old = self.known.get(key)
        if etype != "DELETED" and old is not None \
                and meta(old).get("resourceVersion") == meta(obj).get("resourceVersion") \
                and meta(old).get("uid") == meta(obj).get("uid"):
            return  # only publish when the resourceVersion actually changed
        if etype == "DELETED" and old is None and self.spec.owned_only:
            return  # never published, nothing to retract
        keep = await self._publish(etype, obj, old)
        if etype == "DELETED" or not keep:
            self.known.pop(key, None)
        else:
            self.known[key] = obj

    async def _publish(self, etype: str, obj: Json, old: Json | None) -> bool:
        """The sink (a NATS publish) is retried right here, quickly, until it lands. A failed
        publish is not an API error: sent back through run(), it slept the list/watch backoff,
        which grows to 30 s and only resets when a watch ends cleanly. In the chaos soak (seed 7)
        the RayCluster informer thus slept 6-13 s after a NATS node restart while the Pod
        informer went on: the reconciler saw a deleted RayCluster's Pods vanish (garbage
        collected) but not the RayCluster's own deletion, and created up to 7 head Pods that
        the GC removed again. Events of one kind stay in order: the watch waits meanwhile."""
        async for attempt in AsyncRetrying(wait=wait_exponential(multiplier=PUBLISH_RETRY_S, min=PUBLISH_RETRY_S,
                                                                 max=PUBLISH_RETRY_MAX_S),
                                           retry=retry_if_exception_type(Exception),
                                           before_sleep=self._publish_failed, reraise=True):
            with attempt:
                return await self._sink(etype, obj, old)
        raise AssertionError("unreachable: AsyncRetrying retries forever")

    def _publish_failed(self, state: RetryCallState) -> None:
        self.publish_failures += 1
        log.warning("publish failed; retrying", extra={
            "kind": self.spec.kind.value, "error": repr(state.outcome.exception() if state.outcome else None),
            "retry_s": state.next_action.sleep if state.next_action else None})

    async def run(self) -> None:
        need_list = not self.synced.is_set()
        backoff = 0.8
        while True:
            try:
                if need_list or time.monotonic() >= self._next_resync:
                    await self.relist(why="initial" if not self.synced.is_set()
                                      else "gone" if need_list else "resync")
                    need_list = False
                await self._watch_once()
                backoff = 0.8
            except asyncio.CancelledError:
                raise
            except KubeError as exc:
                if exc.gone:
                    log.info("watch expired, relisting", extra={"kind": self.spec.kind.value,
                                                                "resource_version": self.resource_version})
                    need_list = True
                    continue
                self.api_failures += 1
                log.warning("list/watch failed, retrying from last resourceVersion",
                            extra={"kind": self.spec.kind.value, "code": exc.code, "reason": exc.reason,
                                   "backoff_s": backoff})
                pause = backoff * random.uniform(1.0, 1.5)
                if exc.code == 0 or exc.code >= 500:  # unreachable or restarting: wake when it is back
                    if await self._reconnect.sleep(pause):
                        backoff = 0.8
                        continue
                else:
                    await asyncio.sleep(pause)
                backoff = min(backoff * 2, 30.0)
            except Exception:
                log.exception("informer error", extra={"kind": self.spec.kind.value})
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)

    async def _watch_once(self) -> None:
        remaining = max(1.0, self._next_resync - time.monotonic())
        # client-go randomizes each watch's timeout in [min, 2*min) to spread reconnects.
        timeout = int(min(remaining, self._watch_timeout_s * random.uniform(1.0, 2.0))) or 1
        reached = False
        async for event in self._kube.watch(self._res, resource_version=self.resource_version,
                                            namespace=self._ns, timeout_s=timeout,
                                            label_selector=self.spec.label_selector):
            if not reached:
                reached = True
                self._reconnect.reached()
            rv = str(meta(event.object).get("resourceVersion") or "")
            if event.type != "BOOKMARK":
                await self._apply(event.type, event.object)
            if rv:
                self.resource_version = rv
            if time.monotonic() >= self._next_resync:
                return
