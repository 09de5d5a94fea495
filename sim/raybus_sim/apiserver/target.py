"""Which resource a URL addresses, and the RBAC verb of a request on it (RequestInfo)."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from . import errors
from .keys import STATE
from .resources import ResourceType

# Subresources served per resource (beyond status where declared).
SUBRESOURCES = {"pods": ("binding", "eviction", "log", "resize"), "serviceaccounts": ("token",)}


@dataclass(slots=True)
class Target:
    rt: ResourceType
    namespace: str | None
    name: str | None
    sub: str | None
    watch_path: bool


def parse_target(app: web.Application, segs: list[str]) -> Target:
    """segs: everything after /api/v1 or /apis/<g>/<v>; first two entries are (group, version)."""
    group, version, rest = segs[0], segs[1], segs[2:]
    watch_path = bool(rest) and rest[0] == "watch"
    if watch_path:
        rest = rest[1:]
    ns: str | None = None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        ns, rest = rest[1], rest[2:]
    rt = app[STATE].registry.get(group, version, rest[0]) if rest else None
    if rt is None or len(rest) > 3 or (ns is not None and not rt.namespaced):
        raise errors.page_not_found()
    t = Target(rt, ns, rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None, watch_path)
    if t.sub is not None and t.sub not in SUBRESOURCES.get(rt.gr, ()) and not (
            t.sub == "status" and rt.status_subresource):
        raise errors.page_not_found()
    return t


def verb(t: Target, request: web.Request) -> str:
    method = request.method
    if method == "GET":
        if t.watch_path or request.query.get("watch") in ("1", "true", "True"):
            return "watch"
        return "list" if t.name is None else "get"
    if method == "DELETE":
        return "delete" if t.name is not None else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())
