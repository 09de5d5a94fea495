"""Garbage collector (ownerReferences: background/foreground/orphan) and namespace controller.

Reacts to store events from a listener and does the work in a background task, so like upstream it is
asynchronous: dependents disappear shortly after, not within, the owner's DELETE request.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .defaults import CRD_CLEANUP
from .errors import ApiError
from .resources import ResourceType
from .store import Event, Obj, Store

log = logging.getLogger(__name__)


class GarbageCollector:
    def __init__(self, store: Store, *, orphan_check_delay: float = 0.5) -> None:
        self.store = store
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.orphan_check_delay = orphan_check_delay
        self.task: asyncio.Task[None] | None = None
        store.listeners.append(self.on_event)

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        if self.task:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass

    def on_event(self, ev: Event) -> None:
        meta = ev.obj["metadata"]
        if ev.type == "DELETED":
            self.queue.put_nowait(("owner-gone", meta["uid"]))
            for ref in meta.get("ownerReferences") or ():
                self.queue.put_nowait(("recheck-owner", ref.get("uid")))
            return
        if meta.get("deletionTimestamp"):
            fins = meta.get("finalizers") or ()
            if "foregroundDeletion" in fins or "orphan" in fins:
                self.queue.put_nowait(("owner-deleting", meta["uid"]))
            if ev.rt.gr == "namespaces":
                self.queue.put_nowait(("namespace", meta["name"]))
            if ev.rt.gr == "customresourcedefinitions.apiextensions.k8s.io" and CRD_CLEANUP in fins:
                self.queue.put_nowait(("crd-cleanup", meta["name"]))
        if ev.type == "ADDED" and meta.get("ownerReferences"):
            self.queue.put_nowait(("check-dangling", meta["uid"]))
        elif ev.type == "MODIFIED" and ev.old is not None:
            # A dependent dropping its ownerRef, or being deleted in the foreground, can unblock an owner.
            old_refs = ev.old["metadata"].get("ownerReferences") or ()
            for ref in old_refs:
                self.queue.put_nowait(("recheck-owner", ref.get("uid")))

    async def run(self) -> None:
        while True:
            kind, arg = await self.queue.get()
            try:
                if kind == "check-dangling":
                    asyncio.get_running_loop().call_later(
                        self.orphan_check_delay, self.queue.put_nowait, ("dangling", arg))
                else:
                    self.process(kind, arg)
            except ApiError as err:  # raced with a client write; the next event retries
                log.debug("gc %s %s: %s", kind, arg, err.message)
            except Exception:
                log.exception("gc %s %s failed", kind, arg)

    def process(self, kind: str, arg: Any) -> None:
        if kind == "owner-gone":
            self._collect_dependents(arg)
        elif kind in ("owner-deleting", "recheck-owner"):
            hit = self.store.by_uid(arg) if arg else None
            if hit is not None:
                self._owner_deleting(*hit)
        elif kind == "namespace":
            self._namespace(arg)
        elif kind == "crd-cleanup":
            self._crd_cleanup(arg)
        elif kind == "dangling":
            hit = self.store.by_uid(arg)
            if hit is not None:
                rt, obj = hit
                refs = obj["metadata"].get("ownerReferences") or ()
                if refs and all(self.store.by_uid(r["uid"]) is None for r in refs):
                    self._delete(rt, obj, "Background")

    def _delete(self, rt: ResourceType, obj: Obj, policy: str) -> None:
        meta = obj["metadata"]
        if meta.get("deletionTimestamp") and policy != "Foreground":
            return
        self.store.delete(rt, meta.get("namespace", ""), meta["name"], propagation=policy,
                          preconditions={"uid": meta["uid"]})

    def _drop_ref(self, rt: ResourceType, obj: Obj, owner_uid: str) -> None:
        meta = obj["metadata"]
        refs = [r for r in meta.get("ownerReferences") or () if r.get("uid") != owner_uid]
        new = dict(obj, metadata=dict(meta, ownerReferences=refs))
        if not refs:
            del new["metadata"]["ownerReferences"]
        self.store.update(rt, meta.get("namespace", ""), meta["name"], new, validate=False)

    def _collect_dependents(self, owner_uid: str) -> None:
        for rt, dep in self.store.dependents(owner_uid):
            refs = dep["metadata"].get("ownerReferences") or ()
            others_alive = any(r.get("uid") != owner_uid and self.store.by_uid(r["uid"]) for r in refs)
            if others_alive:
                self._drop_ref(rt, dep, owner_uid)
            else:
                self._delete(rt, dep, "Background")

    def _owner_deleting(self, rt: ResourceType, owner: Obj) -> None:
        meta = owner["metadata"]
        if not meta.get("deletionTimestamp"):
            return
        fins = list(meta.get("finalizers") or ())
        uid = meta["uid"]
        if "orphan" in fins:
            for drt, dep in self.store.dependents(uid):
                self._drop_ref(drt, dep, uid)
            self._remove_finalizer(rt, owner, "orphan")
        elif "foregroundDeletion" in fins:
            blocking = False
            for drt, dep in self.store.dependents(uid):
                ref = next(r for r in dep["metadata"]["ownerReferences"] if r.get("uid") == uid)
                if ref.get("blockOwnerDeletion"):
                    blocking = True
                # Upstream's GC deletes a dependent in the foreground only if it has dependents itself.
                has_deps = bool(self.store.owner_index.get(dep["metadata"]["uid"]))
                if not dep["metadata"].get("deletionTimestamp"):
                    self._delete(drt, dep, "Foreground" if has_deps else "Background")
            if not blocking:
                self._remove_finalizer(rt, owner, "foregroundDeletion")

    def _remove_finalizer(self, rt: ResourceType, obj: Obj, fin: str) -> None:
        cur = self.store.find(rt, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        if cur is None or cur["metadata"]["uid"] != obj["metadata"]["uid"]:
            return
        fins = [f for f in cur["metadata"].get("finalizers") or () if f != fin]
        new = dict(cur, metadata=dict(cur["metadata"], finalizers=fins))
        self.store.update(rt, cur["metadata"].get("namespace", ""), cur["metadata"]["name"], new, validate=False)

    def _crd_cleanup(self, name: str) -> None:
        """A deleted CRD stays (Terminating) until its objects are gone; their finalizers are honoured."""
        store = self.store
        crd_rt = store.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        crd = store.find(crd_rt, "", name) if crd_rt else None
        if crd is None or crd_rt is None or not crd["metadata"].get("deletionTimestamp"):
            return
        rts = [rt for rt in store.registry.by_path.values() if store.registry.crd_owned.get(rt.gr) == name]
        remaining = list(store.state(rts[0].gr).objects.values()) if rts else []
        for obj in remaining:
            if not obj["metadata"].get("deletionTimestamp"):
                store.delete(rts[0], obj["metadata"].get("namespace", ""), obj["metadata"]["name"],
                             propagation="Background")
        if rts and store.state(rts[0].gr).objects:
            asyncio.get_running_loop().call_later(0.2, self.queue.put_nowait, ("crd-cleanup", name))
            return
        self._remove_finalizer(crd_rt, crd, CRD_CLEANUP)

    def _namespace(self, name: str) -> None:
        store = self.store
        remaining = 0
        for gr, st in list(store.states.items()):
            rts = store.registry.by_gr(gr)
            if not rts or not rts[0].namespaced:
                continue
            for (ns, _), obj in list(st.objects.items()):
                if ns != name:
                    continue
                remaining += 1
                if not obj["metadata"].get("deletionTimestamp"):
                    store.delete(rts[0], ns, obj["metadata"]["name"], propagation="Background")
        if remaining == 0 or not any(o for st in store.states.values() for (n, _), o in st.objects.items()
                                     if n == name):
            ns_rt = store.registry.get("", "v1", "namespaces")
            assert ns_rt is not None
            store.finalize_namespace(ns_rt, name)
        else:
            # Objects with finalizers or graceful pods linger; look again shortly, as the controller requeues.
            asyncio.get_running_loop().call_later(0.2, self.queue.put_nowait, ("namespace", name))
