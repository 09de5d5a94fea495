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
- a failed publish to NATS is retried in place (0.1..0.5 s), never through that backoff;
- watch events are published pipelined: up to `window` publishes in flight, so nats-py sends
  them in one write and their JetStream acks come back together (one round trip and one TLS
  record per window instead of per event). Per object the versions still land in order (an
  event waits for the same object's publish in flight: RAYBUS_OBJECTS keeps the last value per
  subject, so a v1 retried after v2 landed would win), and the resume point (resource_version)
  only advances over events whose publish landed, so a watch restart never skips one. They are
  sent in watch order (see _start); only when a publish fails may the ones already sent after it
  land before its retry does (no new one is started until it lands). `window=1` keeps every
  event of the kind strictly in order, failures included.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential

from raybus.adapters.kube import KubeClient, KubeError, resource_for

log = logging.getLogger(__name__)
Json = dict[str, Any]
# A failed publish is retried after 0.1 s, doubling up to 0.5 s: a JetStream leader election
# takes a few seconds, and every second the watcher stays behind is a second a reconciler
# decides on objects the API server has already changed. A coarser step lets one
# informer's publishes through between another's retries in a NATS node restart: the Pod
# informer ran seconds ahead of the RayCluster one, and a deleted RayCluster got a second head.
PUBLISH_RETRY_S = 0.1
PUBLISH_RETRY_MAX_S = 0.5
# Watch-event publishes in flight per informer (see the module docstring).
PUBLISH_WINDOW = 128
Key = tuple[str, str]
# sink(event_type, object, previously published object or None) -> keep tracking the object?
Sink = Callable[[str, Json, Json | None], Awaitable[bool]]


class WatchSpec(Protocol):
    """What one informer lists and watches (the watcher's routing.WatchSpec, the executor's own)."""

    @property
    def name(self) -> str: ...  # for logs
    @property
    def api_version(self) -> str: ...
    @property
    def k8s_kind(self) -> str: ...
    @property
    def label_selector(self) -> str | None: ...
    @property
    def owned_only(self) -> bool: ...
    @property
    def metadata_only(self) -> bool: ...  # PartialObjectMetadata lists and watches


def meta(obj: Mapping[str, Any]) -> Json:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def watch_namespaces(value: str | None) -> tuple[str | None, ...]:
    """KubeRay's --watch-namespace: namespaces separated by commas, "" for all. One informer lists
    and watches each (as controller-runtime's multi-namespace cache), so RBAC may be a Role in
    each; (None,) is one informer over every namespace."""
    names = tuple(dict.fromkeys(n.strip() for n in (value or "").split(",") if n.strip()))
    return names or (None,)


def diff_relist(known: Mapping[tuple[str, str], Json],
                items: list[Json]) -> list[tuple[str, Json]]:
    """What a relist reveals, like client-go's DeltaFIFO.Replace: objects that vanished between
    lists become DELETED (with the last object seen), new or changed ones SYNC, unchanged none."""
    out: list[tuple[str, Json]] = []
    seen: set[tuple[str, str]] = set()
    for item in items:
        m = meta(item)
        key = (str(m.get("namespace") or ""), str(m.get("name") or ""))
        seen.add(key)
        old = known.get(key)
        if old is None or meta(old).get("resourceVersion") != m.get("resourceVersion") \
                or meta(old).get("uid") != m.get("uid"):
            out.append(("SYNC", item))
    out.extend(("DELETED", obj) for key, obj in known.items() if key not in seen)
    return out


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
                 reconnect: Reconnect | None = None, window: int = PUBLISH_WINDOW,
                 transform: Callable[[Json], Json] | None = None, inline: bool = False) -> None:
        self._kube = kube
        # Applied to every object before the sink and `known` see it (the watcher's sanitize):
        # the previous version handed to the sink is then the one published, transformed once.
        self._transform = transform
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
        self._window = max(1, window)
        # A sink that only updates memory (the command-executor's own cache) is applied in line:
        # no task per event, which is what pipelining NATS publishes costs.
        self._inline = inline
        # Watch events in watch order: (its publish task, or None for a BOOKMARK; its rv).
        self._pending: deque[tuple[asyncio.Task[None] | None, str]] = deque()
        self._inflight: dict[Key, asyncio.Task[None]] = {}  # the newest publish per object
        self._running: set[asyncio.Task[None]] = set()
        self._failing = 0  # publishes currently between a failure and their retry landing
        self._unblocked = asyncio.Event()
        self._unblocked.set()

    async def relist(self, *, why: str) -> None:
        try:
            items, rv = await self._kube.list_all(self._res, namespace=self._ns,
                                                  label_selector=self.spec.label_selector,
                                                  metadata_only=self.spec.metadata_only)
        finally:
            self.attempted.set()
        self._reconnect.reached()
        changes = diff_relist(self._mine(), items)
        log.info("relisted", extra={"kind": self.spec.name, "why": why, "items": len(items),
                                    "candidates": len(changes), "resource_version": rv})
        # A relist holds distinct objects only, so they may be published concurrently (in chunks,
        # to bound in-flight publishes); watch events stay strictly in order.
        for start in range(0, len(changes), 64):
            await asyncio.gather(*(self._apply(etype, obj) for etype, obj in changes[start:start + 64]))
        self.resource_version = rv
        self.relists += 1
        self._next_resync = time.monotonic() + self._resync_s
        self.synced.set()

    def _mine(self) -> Mapping[Key, Json]:
        """The known objects this informer lists: `known` may be shared by the informers of one
        kind over several namespaces, and a relist of one says nothing about the others'."""
        if self._ns is None:
            return self.known
        return {k: v for k, v in self.known.items() if k[0] == self._ns}

    async def retract_all(self) -> None:
        """The kind is no longer served (its CRD went, and every object with it): publish DELETED
        for everything published, as a relist that found nothing would."""
        await self.drain()
        for etype, obj in diff_relist(self._mine(), []):
            await self._apply(etype, obj)

    async def _apply(self, etype: str, obj: Json) -> None:
        if self._transform is not None:
            obj = self._transform(obj)
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
        which grows to 30 s and only resets when a watch ends cleanly. After a NATS node restart
        the RayCluster informer thus slept 6-13 s while the Pod
        informer went on: the reconciler saw a deleted RayCluster's Pods vanish (garbage
        collected) but not the RayCluster's own deletion, and created up to 7 head Pods that
        the GC removed again. The watch starts no new event meanwhile (see _start)."""
        try:  # the common case, without building a retry loop per event (~5% of the watcher's CPU)
            return await self._sink(etype, obj, old)
        except Exception as exc:  # noqa: BLE001 - any failure is retried, as below
            first = exc
        self._failing += 1  # hold back new watch events until this one lands
        self._unblocked.clear()
        self.publish_failures += 1
        log.warning("publish failed; retrying", extra={"kind": self.spec.name, "error": repr(first),
                                                       "retry_s": PUBLISH_RETRY_S})
        try:
            await asyncio.sleep(PUBLISH_RETRY_S)
            # Then 0.2 s doubling to PUBLISH_RETRY_MAX_S: the schedule of one loop that had made the first try.
            async for attempt in AsyncRetrying(wait=wait_exponential(multiplier=2 * PUBLISH_RETRY_S,
                                                                     min=2 * PUBLISH_RETRY_S,
                                                                     max=PUBLISH_RETRY_MAX_S),
                                               retry=retry_if_exception_type(Exception),
                                               before_sleep=self._publish_failed, reraise=True):
                with attempt:
                    return await self._sink(etype, obj, old)
        finally:
            self._failing -= 1
            if not self._failing:
                self._unblocked.set()
        raise AssertionError("unreachable: AsyncRetrying retries forever")

    def _publish_failed(self, state: RetryCallState) -> None:
        self.publish_failures += 1
        log.warning("publish failed; retrying", extra={
            "kind": self.spec.name, "error": repr(state.outcome.exception() if state.outcome else None),
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
                    log.info("watch expired, relisting", extra={"kind": self.spec.name,
                                                                "resource_version": self.resource_version})
                    need_list = True
                    continue
                self.api_failures += 1
                log.warning("list/watch failed, retrying from last resourceVersion",
                            extra={"kind": self.spec.name, "code": exc.code, "reason": exc.reason,
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
                log.exception("informer error", extra={"kind": self.spec.name})
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30.0)

    async def _watch_once(self) -> None:
        remaining = max(1.0, self._next_resync - time.monotonic())
        # client-go randomizes each watch's timeout in [min, 2*min) to spread reconnects.
        timeout = int(min(remaining, self._watch_timeout_s * random.uniform(1.0, 2.0))) or 1
        cancelled = False
        reached = False
        try:
            async for event in self._kube.watch(self._res, resource_version=self.resource_version,
                                                namespace=self._ns, timeout_s=timeout,
                                                label_selector=self.spec.label_selector,
                                                metadata_only=self.spec.metadata_only):
                if not reached:
                    reached = True
                    self._reconnect.reached()
                rv = str(meta(event.object).get("resourceVersion") or "")
                if event.type != "BOOKMARK":
                    await self._start(event.type, event.object, rv)
                elif rv:
                    self._pending.append((None, rv))
                if (failure := self._advance()) is not None:
                    raise failure  # as a serial publish's error did: resume from before it
                if time.monotonic() >= self._next_resync:
                    return
        except asyncio.CancelledError:
            cancelled = True  # stop(): Watcher.stop drains, with a deadline
            raise
        finally:
            if not cancelled:
                # A relist or a resumed watch starts from resource_version: only after every
                # event before it landed (a failing publish is retried meanwhile, as before).
                await self.drain()

    async def _start(self, etype: str, obj: Json, rv: str) -> None:
        """Start publishing one watch event once the window has room and the same object's
        publish in flight landed. Waiting there (rather than chaining that object alone) keeps
        the stream in watch order: the reconcilers' caches take the highest Pod resourceVersion
        applied as "every Pod change up to here is in" (ObjectCache.rv_watermark, which scale
        expectations use to tell "not seen yet" from "gone")."""
        if self._inline:
            await self._apply(etype, obj)
            self._pending.append((None, rv))
            return
        await self._unblocked.wait()
        key = _key(obj)
        if (before := self._inflight.get(key)) is not None:
            await asyncio.wait([before])
        while len(self._running) >= self._window:
            await asyncio.wait(set(self._running), return_when=asyncio.FIRST_COMPLETED)
        await self._unblocked.wait()
        task = asyncio.create_task(self._apply(etype, obj))
        self._inflight[key] = task
        self._running.add(task)
        task.add_done_callback(functools.partial(self._done, key))
        self._pending.append((task, rv))

    def _done(self, key: Key, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if self._inflight.get(key) is task:
            del self._inflight[key]
        if not task.cancelled() and task.exception() is not None:
            log.error("publish failed", exc_info=task.exception(), extra={"kind": self.spec.name})
        self._advance()  # the watch loop raises the failure of its oldest event, if any

    def _advance(self) -> BaseException | None:
        """resource_version = the newest event whose publish, and every one before it, landed.
        Returns the error of the oldest event whose publish ended without landing."""
        while self._pending:
            task, rv = self._pending[0]
            if task is not None:
                if not task.done():
                    return None
                if task.cancelled():
                    return RuntimeError("publish cancelled")
                if (exc := task.exception()) is not None:
                    return exc
            self._pending.popleft()
            if rv:
                self.resource_version = rv
        return None

    async def drain(self, timeout: float | None = None) -> None:
        """Wait for every watch-event publish in flight; after `timeout`, cancel what is left.
        What did not land is dropped from the queue: the next watch resumes before it."""
        tasks = [t for t, _ in self._pending if t is not None and not t.done()]
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=timeout)
            for t in late:
                t.cancel()
            if late:
                await asyncio.wait(late)
        self._advance()
        self._pending.clear()
