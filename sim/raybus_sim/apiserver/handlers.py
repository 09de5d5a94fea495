"""HTTP surface: URL parsing, verbs, content negotiation. All state changes go through Store."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from . import discovery, errors, openapi, protobuf
from .defaults import now_rfc3339
from .errors import ApiError
from .events import from_storage, is_converted, to_storage
from .keys import STATE
from .paging import paginate
from .params import int_param
from .patch import json_patch, merge_patch, strategic_merge
from .resources import ResourceType
from .selectors import compile_field_selector, compile_label_selector
from .store import Obj, Store
from .table import to_table
from .watch import serve_watch

log = logging.getLogger(__name__)
JSON = "application/json"
_DUMPS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
# Deleting these returns the object; the rest return a Status, like the upstream REST storages.
_RETURN_DELETED = {"pods", "services"}


def respond(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=_DUMPS(body).encode(), status=status, content_type=JSON)


def error_response(err: ApiError) -> web.Response:
    return respond(err.status(), err.code)


@dataclass(slots=True)
class Target:
    rt: ResourceType
    namespace: str | None
    name: str | None
    sub: str | None
    watch_path: bool


def wants_table(request: web.Request) -> bool:
    return "as=Table" in request.headers.get("Accept", "")


def parse_target(app: web.Application, segs: list[str]) -> Target:
    """segs: everything after /api/v1 or /apis/<g>/<v>; first two entries are (group, version)."""
    group, version, rest = segs[0], segs[1], segs[2:]
    watch_path = bool(rest) and rest[0] == "watch"
    if watch_path:
        rest = rest[1:]
    ns: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        ns, rest = rest[1], rest[2:]
    rt = app[STATE].registry.get(group, version, rest[0])
    if rt is None or len(rest) > 3 or (ns is not None and not rt.namespaced):
        raise errors.page_not_found()
    return Target(rt, ns, rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None, watch_path)


async def read_body(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        raise errors.bad_request("empty request body")
    ctype = request.content_type
    if "protobuf" in ctype:  # kubectl's typed generators (create configmap/secret/ns/...)
        return protobuf.decode(raw)
    try:
        if "yaml" in ctype:
            return yaml.safe_load(raw)
        return json.loads(raw)
    except (ValueError, yaml.YAMLError) as exc:
        raise errors.bad_request(f"error decoding request body: {exc}") from None


def _check_name_ns(t: Target, body: Obj) -> None:
    meta = body.get("metadata") or {}
    if t.rt.namespaced and t.namespace and meta.get("namespace") not in (None, "", t.namespace):
        raise errors.bad_request("the namespace of the provided object does not match the namespace sent on "
                                 "the request")
    if t.name is not None and meta.get("name") not in (None, t.name):
        raise errors.bad_request(f"the name of the object ({meta.get('name')}) does not match the name on the "
                                 f"URL ({t.name})")


def _check_kind(t: Target, body: Any) -> Obj:
    if not isinstance(body, dict):
        raise errors.bad_request("request body must be a JSON object")
    kind, api_version = body.get("kind"), body.get("apiVersion")
    if kind and kind != t.rt.kind and t.sub is None:
        raise errors.bad_request(f"the API version in the data ({api_version}) does not match the expected API "
                                 f"version ({t.rt.api_version})" if kind == "" else
                                 f'{t.rt.kind} in version "{t.rt.version}" cannot be handled as a {kind}')
    return body


def list_response(store: Store, t: Target, request: web.Request) -> web.Response:
    q = request.query
    rt = t.rt
    pred_l = compile_label_selector(q.get("labelSelector"))
    pred_f = compile_field_selector(q.get("fieldSelector"), plural=rt.plural, group=rt.group)
    limit = int_param(q, "limit")
    if limit > 0 or q.get("continue"):
        items, meta = paginate(q, limit=limit, snapshots=request.app[STATE].snapshots, current_rv=str(store.rv),
                               load=lambda: store.list(rt, t.namespace, lambda o: pred_l(o) and pred_f(o)))
        rv = meta["resourceVersion"]
    else:
        items = store.list(rt, t.namespace, lambda o: pred_l(o) and pred_f(o))
        rv = str(store.rv)
        meta = {"resourceVersion": rv}
    if is_converted(rt):
        items = [from_storage(rt, o) for o in items]
    if wants_table(request):
        table = to_table(rt, items, rv)
        table["metadata"] = meta
        return respond(table)
    if not rt.custom:  # built-in list items carry no kind/apiVersion upstream
        items = [{k: v for k, v in o.items() if k != "kind" and k != "apiVersion"} for o in items]
    return respond({"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta, "items": items})


def _delete_options(request: web.Request, body: Any) -> tuple[str | None, int | None, Obj | None, bool]:
    opts = body if isinstance(body, dict) else {}
    q = request.query
    dry = q.get("dryRun") == "All" or "All" in (opts.get("dryRun") or [])  # kubectl puts it in the body
    policy = opts.get("propagationPolicy") or q.get("propagationPolicy")
    orphan = opts.get("orphanDependents", q.get("orphanDependents"))
    if policy is None and orphan is not None:
        policy = "Orphan" if str(orphan).lower() == "true" else "Background"
    if policy not in (None, "Background", "Foreground", "Orphan"):
        raise errors.bad_request(f'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value:'
                                 f' "{policy}": supported values: "Foreground", "Background", "Orphan", "nil"')
    grace = opts.get("gracePeriodSeconds", q.get("gracePeriodSeconds"))
    return policy, None if grace is None else int(grace), opts.get("preconditions"), dry


def _deleted_response(t: Target, obj: Obj, removed: bool) -> web.Response:
    if not removed or t.rt.custom or t.rt.gr in _RETURN_DELETED:
        return respond(obj)
    meta = obj["metadata"]
    details = {"name": meta["name"], "kind": t.rt.plural, "uid": meta["uid"]}
    if t.rt.group:
        details["group"] = t.rt.group
    return respond({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": details})


def _dry(request: web.Request) -> bool:
    return request.query.get("dryRun") == "All"


def _strict(request: web.Request) -> bool:
    # fieldValidation=Strict (kubectl's default) turns silently-pruned unknown CR fields into a 400.
    return request.query.get("fieldValidation") == "Strict"


async def patch_object(store: Store, t: Target, request: web.Request) -> web.Response:
    rt, ns, name = t.rt, t.namespace or "", t.name or ""
    srt = _storage_rt(store, rt)
    ctype = request.content_type
    body = await read_body(request)
    cur = store.find(rt, ns, name)
    if cur is not None:
        cur = from_storage(rt, cur)
    if ctype == "application/apply-patch+yaml":
        # Server-side apply approximated as create-or-merge-patch; no managedFields/conflict detection.
        if not request.query.get("fieldManager"):
            raise errors.invalid("PatchOptions", "meta.k8s.io", "", [
                ("FieldValueRequired", "fieldManager", "Required value: is required for apply patch")])
        _check_name_ns(t, _check_kind(t, body))
        if cur is None:
            if t.sub:
                raise errors.not_found(rt.plural, rt.group, name)
            body.setdefault("metadata", {})["name"] = name
            return respond(from_storage(rt, store.create(srt, ns, to_storage(rt, body), strict=_strict(request),
                                                          dry_run=_dry(request))), 201)
        patched = merge_patch(cur, body)
    elif cur is None:
        raise errors.not_found(rt.plural, rt.group, name)
    elif ctype == "application/merge-patch+json":
        patched = merge_patch(cur, body)
    elif ctype == "application/json-patch+json":
        patched = json_patch(cur, body)
    elif ctype == "application/strategic-merge-patch+json" and not rt.custom:
        patched = strategic_merge(cur, body)
    else:
        raise errors.unsupported_media(ctype)
    if not isinstance(patched, dict):
        raise errors.bad_request("patch result is not an object")
    out = store.update(srt, ns, name, to_storage(rt, patched), subresource=t.sub, strict=_strict(request),
                       dry_run=_dry(request))
    return respond(from_storage(rt, out))


def _storage_rt(store: Store, rt: ResourceType) -> ResourceType:
    if is_converted(rt):
        core = store.registry.get("", "v1", "events")
        assert core is not None
        return core
    return rt


async def resource_handler(request: web.Request, segs: list[str]) -> web.Response | web.StreamResponse:
    app = request.app
    store: Store = app[STATE].store
    t = parse_target(app, segs)
    rt, method, q = t.rt, request.method, request.query
    if t.sub == "log" and rt.gr == "pods" and method == "GET":
        return pod_log(store, t, request)
    if t.sub not in (None, "status", "eviction", "binding") or (t.sub == "status" and not rt.status_subresource):
        raise errors.page_not_found()
    if q.get("dryRun") not in (None, "All"):
        raise errors.bad_request(f'Invalid dry run value: "{q["dryRun"]}" (supported: "All")')
    ns = t.namespace or ""
    if method == "GET":
        if t.name is None or t.watch_path:
            if t.watch_path or q.get("watch") in ("1", "true", "True"):
                return await serve_watch(request, store, t.rt, t.namespace, t.name)
            return list_response(store, t, request)
        obj = from_storage(rt, store.get(rt, ns, t.name))
        if wants_table(request):
            return respond(to_table(rt, [obj], obj["metadata"]["resourceVersion"]))
        return respond(obj)
    if method == "POST":
        body = await read_body(request)
        if t.sub in ("eviction", "binding") and rt.gr == "pods" and t.name:
            return await pod_subresource(store, t, body)
        if t.name is not None or (rt.namespaced and t.namespace is None):
            raise errors.method_not_allowed()
        body = _check_kind(t, body)
        _check_name_ns(t, body)
        srt = _storage_rt(store, rt)
        return respond(from_storage(rt, store.create(srt, ns, to_storage(rt, body), strict=_strict(request),
                                                          dry_run=_dry(request))), 201)
    if t.name is None:
        if method == "DELETE":  # deletecollection
            pred_l = compile_label_selector(q.get("labelSelector"))
            pred_f = compile_field_selector(q.get("fieldSelector"), plural=rt.plural, group=rt.group)
            policy, grace, _, dry = _delete_options(request, await _maybe_body(request))
            out = [from_storage(rt, store.delete(_storage_rt(store, rt), o["metadata"].get("namespace", ""),
                                                 o["metadata"]["name"], propagation=policy, grace=grace,
                                                 dry_run=dry))
                   for o in store.list(rt, t.namespace, lambda o: pred_l(o) and pred_f(o))]
            return respond({"kind": f"{rt.kind}List", "apiVersion": rt.api_version,
                            "metadata": {"resourceVersion": str(store.rv)}, "items": out})
        raise errors.method_not_allowed()
    if method == "PUT":
        body = _check_kind(t, await read_body(request))
        _check_name_ns(t, body)
        updated = store.update(_storage_rt(store, rt), ns, t.name, to_storage(rt, body), subresource=t.sub,
                               require_rv=rt.custom, strict=_strict(request), dry_run=_dry(request))
        return respond(from_storage(rt, updated))
    if method == "PATCH":
        return await patch_object(store, t, request)
    if method == "DELETE":
        policy, grace, pre, dry = _delete_options(request, await _maybe_body(request))
        obj = store.delete(_storage_rt(store, rt), ns, t.name, propagation=policy, grace=grace, preconditions=pre,
                           dry_run=dry)
        return _deleted_response(t, from_storage(rt, obj), store.find(rt, ns, t.name) is None)
    raise errors.method_not_allowed()


def pod_log(store: Store, t: Target, request: web.Request) -> web.Response:
    """Containers here never print anything; answer like a kubelet with an empty log (or upstream's 400s)."""
    pod = store.get(t.rt, t.namespace or "", t.name or "")
    names = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
    names += [c["name"] for c in (pod.get("spec") or {}).get("initContainers") or []]
    container = request.query.get("container")
    if container is None and len(names) > 1:
        raise errors.bad_request(f"a container name must be specified for pod {t.name}, choose one of: "
                                 f"[{' '.join(names)}]")
    if container is not None and container not in names:
        raise errors.bad_request(f"container {container} is not valid for pod {t.name}")
    return web.Response(text="", content_type="text/plain")


async def _maybe_body(request: web.Request) -> Any:
    raw = await request.read()
    return json.loads(raw) if raw.strip() else None


async def pod_subresource(store: Store, t: Target, body: Obj) -> web.Response:
    rt, ns, name = t.rt, t.namespace or "", t.name or ""
    if t.sub == "binding":
        cur = store.get(rt, ns, name)
        if (cur.get("spec") or {}).get("nodeName"):
            raise errors.conflict(rt.plural, rt.group, name, f"pod {name} is already assigned to node "
                                  f"\"{cur['spec']['nodeName']}\"")
        node = (body.get("target") or {}).get("name", "")
        status = dict(cur.get("status") or {})
        status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"] + [
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_rfc3339()}]
        store.update(rt, ns, name, dict(cur, spec=dict(cur["spec"], nodeName=node), status=status),
                     validate=False, subresource="*")
        return respond({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
                       201)
    opts = body.get("deleteOptions") or {}
    store.delete(rt, ns, name, grace=opts.get("gracePeriodSeconds"), preconditions=opts.get("preconditions"))
    return respond({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, 201)


async def dispatch(request: web.Request) -> web.StreamResponse:
    """Single catch-all route: cheaper than aiohttp's router for the many URL shapes here."""
    path = request.path
    reg = request.app[STATE].registry
    try:
        segs = [s for s in path.split("/") if s]
        if not segs:
            return respond({"paths": ["/api", "/api/v1", "/apis", "/version", "/healthz", "/readyz"]})
        head = segs[0]
        if head == "api":
            if len(segs) == 1:
                return respond(discovery.api_versions(request.host))
            if len(segs) == 2:
                doc = discovery.api_resource_list(reg, "", segs[1])
                if doc is None:
                    raise errors.page_not_found()
                return respond(doc)
            return await resource_handler(request, ["", *segs[1:]])
        if head == "apis":
            if len(segs) == 1:
                return respond(discovery.api_group_list(reg))
            if len(segs) == 2:
                doc = discovery.api_group(reg, segs[1])
            elif len(segs) == 3:
                doc = discovery.api_resource_list(reg, segs[1], segs[2])
            else:
                return await resource_handler(request, segs[1:])
            if doc is None:
                raise errors.page_not_found()
            return respond(doc)
        if head == "openapi" and segs[1:] == ["v2"]:
            # An empty protobuf Document (zero bytes) parses fine: kubectl then skips client-side schema
            # validation of kinds it cannot find, so unknown kinds fail with "no matches for kind" as upstream.
            if "protobuf" in request.headers.get("Accept", ""):
                return web.Response(body=b"", content_type="application/octet-stream")
            return respond({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.32.0"}, "paths": {},
                            "definitions": {}})
        if head == "openapi" and len(segs) >= 2 and segs[1] == "v3":
            if len(segs) == 2:
                return respond(openapi.index(reg))
            rest = segs[2:]
            doc = None
            if rest[0] == "api" and len(rest) == 2:
                doc = openapi.gv_doc(reg, "", rest[1])
            elif rest[0] == "apis" and len(rest) == 3:
                doc = openapi.gv_doc(reg, rest[1], rest[2])
            if doc is None:
                raise errors.page_not_found()
            return respond(doc)
        if head == "version":
            return respond(discovery.VERSION_INFO)
        if head in ("healthz", "readyz", "livez"):
            return web.Response(text="ok")
        sim_handler = request.app[STATE].sim_handler
        if head == "sim" and sim_handler is not None:
            return await sim_handler(request, segs[1:])
        raise errors.page_not_found()
    except ApiError as err:
        return error_response(err)
    except (ConnectionResetError, asyncio.CancelledError):
        raise
    except Exception as exc:  # a bug here must still look like an apiserver 500, not an HTML page
        log.exception("internal error serving %s %s", request.method, request.path_qs)
        return error_response(ApiError(500, "InternalError", f"Internal error occurred: {exc!r}"))
