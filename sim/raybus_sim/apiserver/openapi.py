"""Minimal OpenAPI v3 so `kubectl apply` (default --validate=strict) works.

kubectl asks /openapi/v3 whether each GVK's PATCH accepts the `fieldValidation` query parameter; if so it
leaves validation to the server instead of downloading schemas. We advertise that, with no component schemas,
so kubectl computes strategic merge patches from its compiled-in types (built-ins) or JSON merge (CRs).
The server does not actually reject unknown fields (see README).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .resources import Registry

_PARAM = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
          {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
          {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}}]


def _gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def gv_doc(reg: Registry, group: str, version: str) -> dict[str, Any] | None:
    rts = [rt for rt in reg.by_path.values() if rt.group == group and rt.version == version]
    if not rts:
        return None
    paths: dict[str, Any] = {}
    for rt in rts:
        base = f"/{_gv_path(group, version)}/" + ("namespaces/{namespace}/" if rt.namespaced else "")
        gvk = {"group": group, "version": version, "kind": rt.kind}
        op = {"x-kubernetes-group-version-kind": gvk, "parameters": _PARAM, "responses": {}}
        paths[f"{base}{rt.plural}/{{name}}"] = {"patch": op, "put": op, "get": op}
        paths[f"{base}{rt.plural}"] = {"post": op}
        if rt.status_subresource:
            paths[f"{base}{rt.plural}/{{name}}/status"] = {"patch": op, "put": op}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.0"}, "paths": paths,
            "components": {"schemas": {}}}


def index(reg: Registry) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for group, versions in reg.groups().items():
        for version in versions:
            doc = gv_doc(reg, group, version)
            digest = hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:64].upper()
            path = _gv_path(group, version)
            out[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return {"paths": out}
