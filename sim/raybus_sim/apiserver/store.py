"""In-memory object store: one global resourceVersion, per-resource watch history, watcher fan-out.

Stored dicts are never mutated in place once committed (every write builds a new top-level dict and a new
metadata dict), so events can hold references instead of copies and a watcher can read `old` safely.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Callable
from typing import Any

from . import errors
from .decode import decode_builtin
from .defaults import admit, apply_create_defaults, apply_update_defaults, default_object, now_rfc3339
from .jsontree import json_copy
from .podspec import pod_warnings
from .resources import Registry, ResourceType
from .schema import apply_schema
from .selectors import Pred
from .services import ServiceAllocator
from .store_types import Event, Key, Obj, ResourceState, Watcher
from .validation import validate_create, validate_update

__all__ = ["Event", "Key", "Obj", "ResourceState", "Store", "Watcher"]

_GEN_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# Typed objects whose spec defaults are re-applied on every write (a PUT omitting them is no change).
_REDEFAULTED = ("services", "pods", "jobs.batch", "deployments.apps", "statefulsets.apps")


def _strip_for_generation(obj: Obj, keep_status: bool) -> Obj:
    # Without a status subresource, status is just another field and changing it bumps generation.
    skip = ("metadata", "apiVersion", "kind") if keep_status else ("metadata", "status", "apiVersion", "kind")
    return {k: v for k, v in obj.items() if k not in skip}


class Store:
    def __init__(self, registry: Registry, *, history_size: int = 10000) -> None:
        self.registry = registry
        self.history_size = history_size
        self.rv = 1
        # rv from which every resource's history is complete (server start, or the restored rv)
        self.base_rv = 1
        self.states: dict[str, ResourceState] = {}
        self.uid_index: dict[str, tuple[str, Key]] = {}
        self.owner_index: dict[str, set[tuple[str, Key]]] = {}
        # Synchronous observers (GC, kubelet, CRD registration); they must only schedule work, not await.
        self.listeners: list[Callable[[Event], None]] = []
        # Pods on a node are deleted gracefully (kubelet confirms) only when a kubelet is attached.
        self.graceful_pod_delete = False
        self.services = ServiceAllocator()  # clusterIPs / nodePorts in use
        self.listeners.append(self.services.on_event)

    # --- reads -----------------------------------------------------------------------------------
    def state(self, gr: str) -> ResourceState:
        st = self.states.get(gr)
        if st is None:
            st = self.states[gr] = ResourceState(window_start=self.base_rv)
        return st

    def get(self, rt: ResourceType, ns: str, name: str) -> Obj:
        obj = self.state(rt.gr).objects.get((ns if rt.namespaced else "", name))
        if obj is None:
            raise errors.not_found(rt.plural, rt.group, name)
        return obj

    def find(self, rt: ResourceType, ns: str, name: str) -> Obj | None:
        return self.state(rt.gr).objects.get((ns if rt.namespaced else "", name))

    def list(self, rt: ResourceType, ns: str | None, pred: Pred | None = None, *, ordered: bool = False) -> list[Obj]:
        """ordered: in key (namespace/name) order, as etcd returns lists (what API clients see); the
        sim's controllers need no order and skip the sort."""
        objs = self.state(rt.gr).objects
        pairs = sorted(objs.items()) if ordered else objs.items()
        if ns is not None and rt.namespaced:
            items = [o for (n, _), o in pairs if n == ns]
        else:
            items = [o for _, o in pairs]
        if pred is not None:
            items = [o for o in items if pred(o)]
        return items

    def by_uid(self, uid: str) -> tuple[ResourceType, Obj] | None:
        hit = self.uid_index.get(uid)
        if hit is None:
            return None
        gr, key = hit
        rts = self.registry.by_gr(gr)
        obj = self.state(gr).objects.get(key)
        return (rts[0], obj) if rts and obj is not None else None

    def dependents(self, owner_uid: str) -> builtins.list[tuple[ResourceType, Obj]]:
        out = []
        for gr, key in list(self.owner_index.get(owner_uid, ())):
            obj = self.state(gr).objects.get(key)
            rts = self.registry.by_gr(gr)
            if obj is not None and rts:
                out.append((rts[0], obj))
        return out

    # --- writes ----------------------------------------------------------------------------------
    def _commit(self, rt: ResourceType, etype: str, obj: Obj, old: Obj | None) -> None:
        st = self.state(rt.gr)
        meta = obj["metadata"]
        key = (meta.get("namespace", "") if rt.namespaced else "", meta["name"])
        ref = (rt.gr, key)
        if etype == "DELETED":
            st.objects.pop(key, None)
            self.uid_index.pop(meta["uid"], None)
        else:
            st.objects[key] = obj
            self.uid_index[meta["uid"]] = ref
        old_owners = {r.get("uid") for r in (old or {}).get("metadata", {}).get("ownerReferences") or ()}
        new_owners = set() if etype == "DELETED" else {r.get("uid") for r in meta.get("ownerReferences") or ()}
        for uid in old_owners - new_owners:
            deps = self.owner_index.get(uid)
            if deps is not None:
                deps.discard(ref)
                if not deps:
                    del self.owner_index[uid]
        for uid in new_owners - old_owners:
            self.owner_index.setdefault(uid, set()).add(ref)
        ev = Event(int(meta["resourceVersion"]), etype, obj, old, rt)
        if len(st.history) >= self.history_size:
            st.window_start = st.history.popleft().rv
        st.history.append(ev)
        for w in st.watchers:
            w.push(ev)
        for listener in self.listeners:
            listener(ev)

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def create(self, rt: ResourceType, ns: str, obj: Obj, *, field_validation: str | None = None,
               warnings: builtins.list[str] | None = None, dry_run: bool = False) -> Obj:
        """field_validation: None for internal writers (controllers: no decoding checks), else the
        request's Strict/Warn/Ignore; warnings collects what upstream sends as Warning headers."""
        if rt.schema is not None:
            obj = apply_schema(rt, obj, field_validation=field_validation or "Ignore", warnings=warnings)
        elif field_validation is not None:
            obj = decode_builtin(rt, obj, field_validation=field_validation, warnings=warnings)
        meta = dict(obj.get("metadata") or {})
        obj = dict(obj)
        obj["metadata"] = meta
        if rt.namespaced:
            if not ns:
                raise errors.bad_request("the server could not find the requested resource")
            nsobj = self.state("namespaces").objects.get(("", ns))
            if nsobj is None:
                raise errors.not_found("namespaces", "", ns)
            if nsobj["metadata"].get("deletionTimestamp"):
                raise errors.forbidden(rt.plural, rt.group, meta.get("name") or meta.get("generateName", ""),
                                       f"unable to create new content in namespace {ns} because it is being "
                                       f"terminated")
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):
            raise errors.internal("resourceVersion should not be set on objects to be created")
        if not meta.get("name") and meta.get("generateName"):
            # upstream: base truncated to 58 chars + 5 random [bcdfghjklmnpqrstvwxz2456789]
            meta["name"] = meta["generateName"][:58] + "".join(
                _GEN_ALPHABET[b % len(_GEN_ALPHABET)] for b in uuid.uuid4().bytes[:5])
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        default_object(rt, obj)  # decoding defaults, then admission, then validation (upstream's order)
        admit(rt, obj, self)
        validate_create(rt, obj)
        if warnings is not None and rt.gr == "pods":
            warnings.extend(pod_warnings(obj))
        key = (ns if rt.namespaced else "", meta["name"])
        if key in self.state(rt.gr).objects:
            raise errors.already_exists(rt.plural, rt.group, meta["name"])
        if rt.gr == "services":
            self.services.check(meta["name"], ns, obj.get("spec") or {})
        for drop in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(drop, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        if rt.generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        apply_create_defaults(rt, obj, self)
        if dry_run:  # ?dryRun=All: fully processed, never stored
            return obj
        meta["resourceVersion"] = self._next_rv()
        self._commit(rt, "ADDED", obj, None)
        return obj

    def update(self, rt: ResourceType, ns: str, name: str, new: Obj, *, subresource: str | None = None,
               require_rv: bool = False, validate: bool = True, field_validation: str | None = None,
               warnings: builtins.list[str] | None = None, uid_precondition: bool = True,
               dry_run: bool = False) -> Obj:
        """uid_precondition: a PUT's metadata.uid is a precondition (409); in a PATCH result a changed
        uid is an invalid change of an immutable field (422), as upstream."""
        cur = self.get(rt, ns, name)
        cmeta = cur["metadata"]
        nmeta = new.get("metadata") or {}
        if nmeta.get("uid") and nmeta["uid"] != cmeta["uid"]:
            if not uid_precondition:
                raise errors.invalid(rt.kind, rt.group, name, [(
                    "FieldValueInvalid", "metadata.uid", f'Invalid value: "{nmeta["uid"]}": field is immutable')])
            # upstream turns a uid in the body into a precondition (object deleted and re-created)
            key = f"/registry/{rt.group + '/' if rt.custom else ''}{rt.plural}/{ns + '/' if ns else ''}{name}"
            raise errors.conflict(rt.plural, rt.group, name, f"StorageError: invalid object, Code: 4, Key: {key}, "
                                  f"ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in "
                                  f"precondition: {nmeta['uid']}, UID in object meta: {cmeta['uid']}")
        want_rv = nmeta.get("resourceVersion")
        if want_rv:
            if want_rv != cmeta["resourceVersion"]:
                raise errors.conflict(rt.plural, rt.group, name)
        elif require_rv:
            raise errors.invalid(rt.kind, rt.group, name, [(
                "FieldValueInvalid", "metadata.resourceVersion", "Invalid value: 0x0: must be specified for an update")],
                qualified=f"{rt.plural}.{rt.group}" if rt.group else rt.plural)
        if field_validation is not None and rt.schema is None:
            new = decode_builtin(rt, new, field_validation=field_validation, warnings=warnings)
        if subresource == "status":
            out = dict(cur)
            if "status" in new:
                out["status"] = new["status"]
            else:
                out.pop("status", None)
            meta = dict(cmeta)
        else:
            out = dict(new)
            out["apiVersion"], out["kind"] = rt.api_version, rt.kind
            # (internal writers build from stored, already-defaulted objects: no need to re-default)
            if validate and isinstance(out.get("spec"), dict) and rt.gr in _REDEFAULTED:
                out["spec"] = json_copy(out["spec"])
                apply_update_defaults(rt, out, cur)
            if rt.status_subresource and subresource != "*":  # "*": internal spec+status write (binding)
                if "status" in cur:
                    out["status"] = cur["status"]
                else:
                    out.pop("status", None)
            meta = dict(nmeta)
            # Server-owned metadata cannot be changed by clients.
            for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "name",
                      "namespace"):
                if k in cmeta:
                    meta[k] = cmeta[k]
                else:
                    meta.pop(k, None)
        out["metadata"] = meta
        if rt.schema is not None:  # before generation/no-op checks: defaulting can make a write a no-op
            out = apply_schema(rt, out, field_validation=field_validation or "Ignore", warnings=warnings, old=cur)
            meta = out["metadata"]
        if subresource != "status":
            # pods/binding (internal "*") sets nodeName without a generation bump, as upstream
            if rt.generation and not (rt.gr == "pods" and subresource == "*"):
                gen = cmeta.get("generation", 1)
                keep = not rt.status_subresource
                if _strip_for_generation(out, keep) != _strip_for_generation(cur, keep):
                    gen += 1
                meta["generation"] = gen
            elif not rt.generation:
                meta.pop("generation", None)
        meta["resourceVersion"] = cmeta["resourceVersion"]
        if out == cur:
            return cur  # no-op writes neither bump resourceVersion nor emit events, as upstream
        # Internal writers (kubelet binding) bypass the client-facing immutability rules; status writes
        # cannot touch spec/metadata here, so those checks are moot for them.
        if validate and subresource != "status":
            validate_update(rt, out, cur, subresource=subresource)
            if rt.gr == "services":
                self.services.check(name, ns, out.get("spec") or {}, old=cur.get("spec") or {})
        if dry_run:
            return out
        meta["resourceVersion"] = self._next_rv()
        self._commit(rt, "MODIFIED", out, cur)
        # Emptied finalizers finish a pending deletion (pods only once the kubelet confirmed: grace 0).
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and (
                rt.gr != "pods" or meta.get("deletionGracePeriodSeconds", 0) == 0):
            return self._remove(rt, out)
        return out

    def _remove(self, rt: ResourceType, cur: Obj) -> Obj:
        out = dict(cur)
        out["metadata"] = dict(cur["metadata"], resourceVersion=self._next_rv())
        if rt.gr == "pods" and "deletionTimestamp" not in out["metadata"]:
            # pods delete gracefully even with grace 0: the last state carries the deletion stamp
            out["metadata"].update(deletionTimestamp=now_rfc3339(), deletionGracePeriodSeconds=0)
        self._commit(rt, "DELETED", out, cur)
        return out

    def delete(self, rt: ResourceType, ns: str, name: str, *, propagation: str | None = None,
               grace: int | None = None, preconditions: dict[str, Any] | None = None,
               dry_run: bool = False) -> Obj:
        cur = self.get(rt, ns, name)
        cmeta = cur["metadata"]
        pre = preconditions or {}
        # rest.BeforeDelete's checks: the conflict names the Kind (GroupResource{group, Kind})
        if pre.get("uid") and pre["uid"] != cmeta["uid"]:
            raise errors.conflict(rt.kind, rt.group, name, f"the UID in the precondition ({pre['uid']}) does not "
                                  f"match the UID in record ({cmeta['uid']}). The object might have been deleted "
                                  f"and then recreated")
        if pre.get("resourceVersion") and pre["resourceVersion"] != cmeta["resourceVersion"]:
            raise errors.conflict(rt.kind, rt.group, name, f"the ResourceVersion in the precondition "
                                  f"({pre['resourceVersion']}) does not match the ResourceVersion in record "
                                  f"({cmeta['resourceVersion']}). The object might have been modified")
        if dry_run:
            return cur
        finalizers = list(cmeta.get("finalizers") or [])
        policy = propagation or rt.default_propagation
        if policy == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers = [f for f in finalizers if f != "orphan"] + ["foregroundDeletion"]
        elif policy == "Orphan" and "orphan" not in finalizers:
            finalizers = [f for f in finalizers if f != "foregroundDeletion"] + ["orphan"]
        elif propagation == "Background":
            finalizers = [f for f in finalizers if f not in ("orphan", "foregroundDeletion")]
        if rt.gr == "namespaces":
            return self._delete_namespace(rt, cur)
        graceful_secs = 0
        if rt.gr == "pods" and self.graceful_pod_delete and (cur.get("spec") or {}).get("nodeName"):
            phase = (cur.get("status") or {}).get("phase")
            if phase not in ("Succeeded", "Failed"):
                graceful_secs = grace if grace is not None else (cur["spec"].get("terminationGracePeriodSeconds", 30))
        if not finalizers and graceful_secs == 0:
            return self._remove(rt, cur)
        meta = dict(cmeta, finalizers=finalizers)
        if not finalizers:
            meta.pop("finalizers")
        if not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = now_rfc3339()
            meta["deletionGracePeriodSeconds"] = graceful_secs
            if meta.get("generation"):
                meta["generation"] += 1
        elif rt.gr == "pods" and graceful_secs < meta.get("deletionGracePeriodSeconds", 0):
            meta["deletionGracePeriodSeconds"] = graceful_secs  # grace may only shorten
        if meta == cmeta:
            return cur
        out = dict(cur, metadata=meta)
        meta["resourceVersion"] = self._next_rv()
        self._commit(rt, "MODIFIED", out, cur)
        if not finalizers and meta.get("deletionGracePeriodSeconds", 0) == 0:
            return self._remove(rt, out)
        return out

    def _delete_namespace(self, rt: ResourceType, cur: Obj) -> Obj:
        # Namespace deletion is two-phase upstream: phase Terminating + spec.finalizers ["kubernetes"];
        # the namespace controller (gc.py) empties it and then removes it.
        if cur["metadata"].get("deletionTimestamp"):
            return cur
        out = dict(cur, metadata=dict(cur["metadata"], deletionTimestamp=now_rfc3339(),
                                      deletionGracePeriodSeconds=0),
                   spec={"finalizers": ["kubernetes"]}, status={"phase": "Terminating"})
        out["metadata"]["resourceVersion"] = self._next_rv()
        self._commit(rt, "MODIFIED", out, cur)
        return out

    def finalize_namespace(self, rt: ResourceType, name: str) -> None:
        cur = self.find(rt, "", name)
        if cur is None:
            return
        if cur["metadata"].get("finalizers"):
            out = dict(cur, spec={})
            out["metadata"] = dict(cur["metadata"], resourceVersion=self._next_rv())
            self._commit(rt, "MODIFIED", out, cur)
        else:
            self._remove(rt, cur)

    # --- watch -----------------------------------------------------------------------------------
    def watch(self, rt: ResourceType, ns: str | None, rv: str | None, pred: Pred,
              *, send_initial: bool | None = None) -> tuple[Watcher, builtins.list[tuple[str, Obj]]]:
        """Register a watcher; returns it plus the events to send before live ones.

        rv unset/"0" replays current state as ADDED (upstream "start at most recent"/"any"); rv=N replays
        history after N or raises 410 when N fell out of the window.
        """
        st = self.state(rt.gr)
        ns = ns if rt.namespaced else None
        w = Watcher(ns, pred)
        backlog: builtins.list[tuple[str, Obj]] = []
        if not rv or rv == "0" or send_initial:
            backlog = [("ADDED", o) for o in self.list(rt, ns, pred)]
            backlog.sort(key=lambda e: int(e[1]["metadata"]["resourceVersion"]))
        else:
            try:
                start = int(rv)
            except ValueError:
                raise errors.bad_request(f'invalid resource version: "{rv}"') from None
            if start < st.window_start:
                raise errors.gone(f"too old resource version: {start} ({st.window_start})")
            replay = Watcher(ns, pred)
            for ev in st.history:
                if ev.rv > start:
                    replay.push(ev)
            while not replay.queue.empty():
                backlog.append(replay.queue.get_nowait())
        st.watchers.add(w)
        return w, backlog

    def close_watchers(self) -> None:
        """End every open watch stream (server shutdown); clients see a clean EOF and re-watch."""
        for st in self.states.values():
            for w in st.watchers:
                w.queue.put_nowait(("CLOSE", {}))

    def unwatch(self, rt: ResourceType, w: Watcher) -> None:
        self.state(rt.gr).watchers.discard(w)
