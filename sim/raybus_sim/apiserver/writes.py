"""Write verbs: create, update (PUT), patch, delete, and the pod/serviceaccount subresources."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import yaml
from aiohttp import web
from pydantic_core import from_json

from . import errors, protobuf
from .auth import User
from .defaults import now_rfc3339
from .events import event_causes, from_storage, is_converted, to_storage
from .keys import STATE
from .patch import json_patch, merge_patch, strategic_merge
from .podspec import resized
from .resources import ResourceType
from .responses import respond, warnings
from .store import Obj, Store
from .target import Target

_RETURN_DELETED = {"pods", "services"}  # deleting these returns the object; others a Status, as upstream
_FIELD_VALIDATION = ("Strict", "Warn", "Ignore")


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
        try:
            return from_json(raw)  # a third of json.loads' time on a Pod (issue 20)
        except ValueError:
            return json.loads(raw)  # for json's wording of the error, which clients see
    except (ValueError, yaml.YAMLError) as exc:
        raise errors.bad_request(f"error decoding request body: {exc}") from None


def field_validation(request: web.Request) -> str:
    """fieldValidation: Strict (kubectl's default), Warn (the server's default), Ignore."""
    value = request.query.get("fieldValidation") or "Warn"
    if value not in _FIELD_VALIDATION:
        raise errors.bad_request(f'fieldValidation parameter unsupported: "{value}"')
    return value


def dry(request: web.Request) -> bool:
    return request.query.get("dryRun") == "All"


def check_name_ns(t: Target, body: Obj) -> None:
    meta = body.get("metadata") or {}
    if t.rt.namespaced and t.namespace and meta.get("namespace") not in (None, "", t.namespace):
        raise errors.bad_request("the namespace of the provided object does not match the namespace sent on "
                                 "the request")
    if t.name is not None and meta.get("name") not in (None, t.name):
        raise errors.bad_request(f"the name of the object ({meta.get('name')}) does not match the name on the "
                                 f"URL ({t.name})")


def check_kind(t: Target, body: Any, raw: bytes | None = None) -> Obj:
    if not isinstance(body, dict):
        raise errors.bad_request("request body must be a JSON object")
    kind, api_version = body.get("kind"), body.get("apiVersion")
    rt = t.rt
    if rt.custom and t.sub is None:
        # The unstructured decoder needs kind/apiVersion; the CR handler then checks them.
        if not kind or not api_version:
            text = (raw or json.dumps(body).encode()).decode(errors="replace")
            what = "Kind" if not kind else "apiVersion"
            raise errors.bad_request(f"the object provided is unrecognized (must be of type {rt.kind}): Object "
                                     f"'{what}' is missing in '{text}'")
        if kind != rt.kind:
            group = api_version.rpartition("/")[0]
            name = str((body.get("metadata") or {}).get("name") or "")
            raise errors.invalid(kind, group, name, [("FieldValueInvalid", "kind", (f'Invalid value: "{kind}": '
                                                      f"must be {rt.kind}"))])
        return body
    if kind and kind != rt.kind and t.sub is None:
        raise errors.bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {kind}')
    return body


def storage_rt(store: Store, rt: ResourceType) -> ResourceType:
    if is_converted(rt):
        core = store.registry.get("", "v1", "events")
        assert core is not None
        return core
    return rt


def _admit(request: web.Request, user: User, t: Target, obj: Obj, *, create: bool) -> None:
    """Validating admission that needs the request: RBAC escalation prevention, Event rules."""
    state = request.app[STATE]
    state.authorizer.admit_rbac_write(user, t.rt.plural if t.rt.group == "rbac.authorization.k8s.io" else "",
                                      t.namespace or "", obj)
    if create and t.rt.gr == "events":
        causes = event_causes(to_storage(t.rt, obj) | {"metadata": {**(obj.get("metadata") or {}),
                                                                    "namespace": t.namespace or ""}},
                              new_api=is_converted(t.rt))
        if causes:
            raise errors.invalid("Event", "", str((obj.get("metadata") or {}).get("name") or ""), causes)


async def create_object(store: Store, t: Target, request: web.Request, user: User) -> web.Response:
    raw = await request.read()
    body = check_kind(t, await read_body(request), raw)
    check_name_ns(t, body)
    _admit(request, user, t, body, create=True)
    created = store.create(storage_rt(store, t.rt), t.namespace or "", to_storage(t.rt, body),
                           field_validation=field_validation(request), warnings=warnings(), dry_run=dry(request))
    return respond(from_storage(t.rt, created), 201)


async def replace_object(store: Store, t: Target, request: web.Request, user: User) -> web.Response:
    body = check_kind(t, await read_body(request))
    check_name_ns(t, body)
    if t.sub == "resize":
        return _resize(store, t, body, request)
    _admit(request, user, t, body, create=False)
    updated = store.update(storage_rt(store, t.rt), t.namespace or "", t.name or "", to_storage(t.rt, body),
                           subresource=t.sub, require_rv=t.rt.custom, field_validation=field_validation(request),
                           warnings=warnings(), dry_run=dry(request))
    return respond(from_storage(t.rt, updated))


async def patch_object(store: Store, t: Target, request: web.Request, user: User) -> web.Response:
    rt, ns, name = t.rt, t.namespace or "", t.name or ""
    srt = storage_rt(store, rt)
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
        check_name_ns(t, check_kind(t, body))
        if cur is None:
            if t.sub:
                raise errors.not_found(rt.plural, rt.group, name)
            body.setdefault("metadata", {})["name"] = name
            _admit(request, user, t, body, create=True)
            created = store.create(srt, ns, to_storage(rt, body), field_validation=field_validation(request),
                                   warnings=warnings(), dry_run=dry(request))
            return respond(from_storage(rt, created), 201)
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
        raise errors.unsupported_media(rt.custom)
    if not isinstance(patched, dict):
        raise errors.bad_request("patch result is not an object")
    if t.sub == "resize":
        return _resize(store, t, patched, request)
    _admit(request, user, t, patched, create=False)
    out = store.update(srt, ns, name, to_storage(rt, patched), subresource=t.sub,
                       field_validation=field_validation(request), warnings=warnings(), uid_precondition=False,
                       dry_run=dry(request))
    return respond(from_storage(rt, out))


def _resize(store: Store, t: Target, wanted: Obj, request: web.Request) -> web.Response:
    """pods/resize: only containers' resources/resizePolicy are taken from the request."""
    cur = store.get(t.rt, t.namespace or "", t.name or "")
    new = resized(cur, wanted)
    new["metadata"] = dict(cur["metadata"], resourceVersion=(wanted.get("metadata") or {}).get(
        "resourceVersion") or cur["metadata"]["resourceVersion"])
    return respond(store.update(t.rt, t.namespace or "", t.name or "", new, subresource="resize",
                                dry_run=dry(request)))


def delete_options(request: web.Request, body: Any) -> tuple[str | None, int | None, Obj | None, bool]:
    opts = body if isinstance(body, dict) else {}
    q = request.query
    dry_run = q.get("dryRun") == "All" or "All" in (opts.get("dryRun") or [])  # kubectl puts it in the body
    policy = opts.get("propagationPolicy") or q.get("propagationPolicy")
    orphan = opts.get("orphanDependents", q.get("orphanDependents"))
    if policy is None and orphan is not None:
        policy = "Orphan" if str(orphan).lower() == "true" else "Background"
    if policy not in (None, "Background", "Foreground", "Orphan"):
        raise errors.invalid("DeleteOptions", "meta.k8s.io", "", [(
            "FieldValueNotSupported", "propagationPolicy", (f'Unsupported value: "{policy}": supported values: '
            f'"Foreground", "Background", "Orphan", "nil"'))])
    grace = opts.get("gracePeriodSeconds", q.get("gracePeriodSeconds"))
    return policy, None if grace is None else int(grace), opts.get("preconditions"), dry_run


async def maybe_body(request: web.Request) -> Any:
    raw = await request.read()
    return json.loads(raw) if raw.strip() else None


async def delete_object(store: Store, t: Target, request: web.Request) -> web.Response:
    rt, ns = t.rt, t.namespace or ""
    policy, grace, pre, dry_run = delete_options(request, await maybe_body(request))
    obj = from_storage(rt, store.delete(storage_rt(store, rt), ns, t.name or "", propagation=policy, grace=grace,
                                        preconditions=pre, dry_run=dry_run))
    if store.find(rt, ns, t.name or "") is not None or rt.custom or rt.gr in _RETURN_DELETED:
        return respond(obj)
    meta = obj["metadata"]
    details = {"name": meta["name"], "kind": rt.plural, "uid": meta["uid"]}
    if rt.group:
        details = {"name": meta["name"], "group": rt.group, "kind": rt.plural, "uid": meta["uid"]}
    return respond({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})


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


def token_request(request: web.Request, t: Target, body: Obj) -> web.Response:
    """TokenRequest (serviceaccounts/<name>/token): a token for that ServiceAccount, subject to RBAC."""
    spec = dict(body.get("spec") or {})
    seconds = int(spec.get("expirationSeconds") or 3600)
    token, expiry = request.app[STATE].authenticator.mint(t.namespace or "", t.name or "", expiration_s=seconds)
    spec.setdefault("audiences", ["https://kubernetes.default.svc"])
    spec["expirationSeconds"] = seconds
    spec.setdefault("boundObjectRef", None)
    stamp = dt.datetime.fromtimestamp(expiry, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return respond({"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                    "metadata": {"name": t.name, "namespace": t.namespace, "creationTimestamp": None},
                    "spec": spec, "status": {"token": token, "expirationTimestamp": stamp}}, 201)
