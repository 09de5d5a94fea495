"""HTTP surface: URL parsing, authentication/authorization, verbs. All state changes go through Store."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from . import discovery, errors, openapi
from .auth import Attributes, User
from .errors import ApiError
from .events import from_storage, is_converted
from .keys import STATE
from .paging import paginate
from .params import int_param
from .responses import WARNINGS, error_response, respond
from .selectors import compile_field_selector, compile_label_selector
from .store import Store
from .table import partial_metadata, partial_metadata_list, to_table, wants_metadata
from .target import Target, parse_target, verb
from .watch import serve_watch
from .writes import (
    create_object,
    delete_object,
    delete_options,
    maybe_body,
    patch_object,
    pod_subresource,
    read_body,
    replace_object,
    storage_rt,
    token_request,
)

log = logging.getLogger(__name__)


def wants_table(request: web.Request) -> bool:
    return "as=Table" in request.headers.get("Accept", "")


def list_options_causes(request: web.Request, *, watch: bool, watch_list: bool) -> list[tuple[str, str, str]]:
    """ValidateListOptions (apimachinery internalversion/validation)."""
    q = request.query
    match, rv, initial = q.get("resourceVersionMatch"), q.get("resourceVersion"), q.get("sendInitialEvents")
    causes: list[tuple[str, str, str]] = []
    if watch:
        if initial is not None:
            if match != "NotOlderThan":
                causes.append(("FieldValueForbidden", "resourceVersionMatch", ("Forbidden: sendInitialEvents requires "
                               "setting resourceVersionMatch to NotOlderThan")))
            if not watch_list:
                causes.append(("FieldValueForbidden", "sendInitialEvents", ("Forbidden: sendInitialEvents is "
                               "forbidden for watch unless the WatchList feature gate is enabled")))
        if match:
            if initial is None:
                causes.append(("FieldValueForbidden", "resourceVersionMatch", ("Forbidden: resourceVersionMatch is "
                               "forbidden for watch unless sendInitialEvents is provided")))
            elif match != "NotOlderThan":
                causes.append(("FieldValueNotSupported", "resourceVersionMatch", (f'Unsupported value: "{match}": '
                               'supported values: "NotOlderThan"')))
        return causes
    if match:
        if not rv:
            causes.append(("FieldValueForbidden", "resourceVersionMatch", ("Forbidden: resourceVersionMatch is "
                           "forbidden unless resourceVersion is provided")))
        if q.get("continue"):
            causes.append(("FieldValueForbidden", "resourceVersionMatch", ("Forbidden: resourceVersionMatch is "
                           "forbidden when continue is provided")))
        if match not in ("Exact", "NotOlderThan"):
            causes.append(("FieldValueNotSupported", "resourceVersionMatch", (f'Unsupported value: "{match}": '
                           'supported values: "Exact", "NotOlderThan", ""')))
        elif match == "Exact" and rv == "0":
            causes.append(("FieldValueForbidden", "resourceVersionMatch", ('Forbidden: resourceVersionMatch "exact" '
                           'is forbidden for resourceVersion "0"')))
    if initial is not None:
        causes.append(("FieldValueForbidden", "sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list"))
    return causes


def list_response(store: Store, t: Target, request: web.Request) -> web.Response:
    q = request.query
    rt = t.rt
    pred_l = compile_label_selector(q.get("labelSelector"))
    pred_f = compile_field_selector(q.get("fieldSelector"), plural=rt.plural, group=rt.group, custom=rt.custom)
    limit = int_param(q, "limit")
    if limit > 0 or q.get("continue"):
        items, meta = paginate(q, limit=limit, snapshots=request.app[STATE].snapshots, current_rv=str(store.rv),
                               load=lambda: store.list(rt, t.namespace),
                               pred=lambda o: pred_l(o) and pred_f(o),
                               selected=bool(q.get("labelSelector") or q.get("fieldSelector")))
        rv = meta["resourceVersion"]
    else:
        items = store.list(rt, t.namespace, lambda o: pred_l(o) and pred_f(o), ordered=True)
        rv = str(store.rv)
        meta = {"resourceVersion": rv}
    if is_converted(rt):
        items = [from_storage(rt, o) for o in items]
    if wants_table(request):
        table = to_table(rt, items, rv)
        table["metadata"] = meta
        return respond(table)
    if wants_metadata(request.headers.get("Accept", ""), collection=True):
        return respond(partial_metadata_list(items, meta))
    if not rt.custom:  # built-in list items carry no kind/apiVersion upstream
        items = [{k: v for k, v in o.items() if k != "kind" and k != "apiVersion"} for o in items]
    return respond({"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta, "items": items})


async def resource_handler(request: web.Request, segs: list[str], user: User) -> web.StreamResponse:
    app = request.app
    state = app[STATE]
    store: Store = state.store
    t = parse_target(app, segs)
    rt, method, q = t.rt, request.method, request.query
    the_verb = verb(t, request)
    if not user.admin:
        state.authorizer.check(user, Attributes(the_verb, rt.group, rt.plural, t.sub or "", t.namespace or "",
                                                t.name or ""))
    if q.get("dryRun") not in (None, "All"):
        raise errors.bad_request(f'Invalid dry run value: "{q["dryRun"]}" (supported: "All")')
    if t.sub == "log":
        if method != "GET":
            raise errors.method_not_allowed()
        return pod_log(store, t, request)
    ns = t.namespace or ""
    if method == "GET":
        if the_verb in ("list", "watch"):
            causes = list_options_causes(request, watch=the_verb == "watch", watch_list=state.watch_list)
            if causes:
                raise errors.invalid("ListOptions", "meta.k8s.io", "", causes)
            if the_verb == "watch":
                return await serve_watch(request, store, t.rt, t.namespace, t.name)
            return list_response(store, t, request)
        obj = from_storage(rt, store.get(rt, ns, t.name or ""))
        if wants_table(request):
            return respond(to_table(rt, [obj], obj["metadata"]["resourceVersion"]))
        if wants_metadata(request.headers.get("Accept", ""), collection=False):
            return respond(partial_metadata(obj))
        return respond(obj)
    if method == "POST":
        if t.sub in ("eviction", "binding") and t.name:
            return await pod_subresource(store, t, await read_body(request))
        if t.sub == "token" and t.name:
            store.get(rt, ns, t.name)  # 404 for a missing ServiceAccount
            return token_request(request, t, await read_body(request))
        if t.name is not None or (rt.namespaced and t.namespace is None):
            raise errors.method_not_allowed()
        return await create_object(store, t, request, user)
    if t.name is None:
        if method == "DELETE":  # deletecollection
            pred_l = compile_label_selector(q.get("labelSelector"))
            pred_f = compile_field_selector(q.get("fieldSelector"), plural=rt.plural, group=rt.group,
                                            custom=rt.custom)
            policy, grace, _, dry = delete_options(request, await maybe_body(request))
            out = [from_storage(rt, store.delete(storage_rt(store, rt), o["metadata"].get("namespace", ""),
                                                 o["metadata"]["name"], propagation=policy, grace=grace,
                                                 dry_run=dry))
                   for o in store.list(rt, t.namespace, lambda o: pred_l(o) and pred_f(o))]
            return respond({"kind": f"{rt.kind}List", "apiVersion": rt.api_version,
                            "metadata": {"resourceVersion": str(store.rv)}, "items": out})
        raise errors.method_not_allowed()
    if method == "PUT":
        return await replace_object(store, t, request, user)
    if method == "PATCH":
        return await patch_object(store, t, request, user)
    if method == "DELETE" and t.sub is None:
        return await delete_object(store, t, request)
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


async def _non_resource(request: web.Request, segs: list[str]) -> web.StreamResponse:
    reg = request.app[STATE].registry
    head = segs[0] if segs else ""
    if not segs:
        return respond({"paths": ["/api", "/api/v1", "/apis", "/version", "/healthz", "/readyz"]})
    if head == "api":
        doc = discovery.api_versions(request.host) if len(segs) == 1 else discovery.api_resource_list(
            reg, "", segs[1])
    elif head == "apis":
        doc = discovery.api_group_list(reg) if len(segs) == 1 else discovery.api_group(reg, segs[1]) if len(
            segs) == 2 else discovery.api_resource_list(reg, segs[1], segs[2])
    elif head == "openapi" and segs[1:] == ["v2"]:
        # An empty protobuf Document (zero bytes) parses fine: kubectl then skips client-side schema
        # validation of kinds it cannot find, so unknown kinds fail with "no matches for kind" as upstream.
        if "protobuf" in request.headers.get("Accept", ""):
            return web.Response(body=b"", content_type="application/octet-stream")
        doc = {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.33.0"}, "paths": {},
               "definitions": {}}
    elif head == "openapi" and len(segs) >= 2 and segs[1] == "v3":
        rest = segs[2:]
        doc = openapi.index(reg) if not rest else openapi.gv_doc(reg, "", rest[1]) if (
            rest[0] == "api" and len(rest) == 2) else openapi.gv_doc(reg, rest[1], rest[2]) if (
            rest[0] == "apis" and len(rest) == 3) else None
    elif head == "version":
        doc = discovery.VERSION_INFO
    elif head in ("healthz", "readyz", "livez"):
        return web.Response(text="ok")
    else:
        doc = None
    if doc is None:
        raise errors.page_not_found()
    return respond(doc)


async def dispatch(request: web.Request) -> web.StreamResponse:
    """Single catch-all route: cheaper than aiohttp's router for the many URL shapes here."""
    state = request.app[STATE]
    token = WARNINGS.set([])
    try:
        segs = [s for s in request.path.split("/") if s]
        if segs[:3] == ["sim", "apiserver", "faults"] and state.faults is not None:
            return await state.faults.control(request)
        if segs and segs[0] == "sim" and state.sim_handler is not None:
            return await state.sim_handler(request, segs[1:])
        user = state.authenticator.user(request.headers.get("Authorization"))
        if user is None:
            raise errors.unauthorized()
        if state.faults is not None and (faulty := await state.faults.intercept(request, admin=user.admin)):
            return faulty
        if len(segs) >= 3 and segs[0] == "api":
            return await resource_handler(request, ["", *segs[1:]], user)
        if len(segs) >= 4 and segs[0] == "apis":
            return await resource_handler(request, segs[1:], user)
        return await _non_resource(request, segs)  # discovery/openapi/version: any authenticated user
    except ApiError as err:
        return error_response(err)
    except (ConnectionResetError, asyncio.CancelledError):
        raise
    except Exception as exc:  # a bug here must still look like an apiserver 500, not an HTML page
        log.exception("internal error serving %s %s", request.method, request.path_qs)
        return error_response(ApiError(500, "InternalError", f"Internal error occurred: {exc!r}"))
    finally:
        WARNINGS.reset(token)
