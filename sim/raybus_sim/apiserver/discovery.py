"""Legacy (non-aggregated) discovery documents; kubectl falls back to these when the response is plain JSON."""

from __future__ import annotations

from typing import Any

from .resources import VERBS, Registry, ResourceType

VERSION_INFO = {
    "major": "1", "minor": "33", "gitVersion": "v1.33.0-raybus-sim", "gitCommit": "0000000",
    "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23",
    "compiler": "gc", "platform": "linux/amd64",
}


def api_versions(server_address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    vs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": vs, "preferredVersion": vs[0]}


def api_group_list(reg: Registry) -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [_group(g, vs) for g, vs in reg.groups().items() if g]}


def api_group(reg: Registry, group: str) -> dict[str, Any] | None:
    versions = reg.groups().get(group)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


def _entry(rt: ResourceType) -> dict[str, Any]:
    e: dict[str, Any] = {"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
                         "kind": rt.kind, "verbs": VERBS}
    if rt.short_names:
        e["shortNames"] = list(rt.short_names)
    if rt.categories:
        e["categories"] = list(rt.categories)
    return e


def _sub(rt: ResourceType, sub: str, kind: str, verbs: list[str], group: str = "", version: str = "") -> dict[str, Any]:
    e = {"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced, "kind": kind,
         "verbs": verbs}
    if group:
        e["group"], e["version"] = group, version
    return e


def api_resource_list(reg: Registry, group: str, version: str) -> dict[str, Any] | None:
    rts = [rt for rt in reg.by_path.values() if rt.group == group and rt.version == version]
    if not rts:
        return None
    resources = []
    for rt in rts:
        resources.append(_entry(rt))
        if rt.status_subresource:
            resources.append(_sub(rt, "status", rt.kind, ["get", "patch", "update"]))
        if rt.gr == "pods":
            resources.append(_sub(rt, "binding", "Binding", ["create"]))
            resources.append(_sub(rt, "eviction", "Eviction", ["create"], "policy", "v1"))
            resources.append(_sub(rt, "log", "Pod", ["get"]))
            resources.append(_sub(rt, "resize", "Pod", ["get", "patch", "update"]))
        if rt.gr == "serviceaccounts":
            resources.append(_sub(rt, "token", "TokenRequest", ["create"], "authentication.k8s.io", "v1"))
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}
