"""PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

Strategic merge uses a field-name table of merge keys instead of the Go struct tags upstream reads; that
covers the lists kubectl apply touches on pods/services/jobs (containers by name, ports, env, volumes...).
"""

from __future__ import annotations

from typing import Any

from .errors import bad_request, invalid_patch
from .jsontree import json_copy

# field name -> merge key. `ports` is resolved per element (containerPort for containers, port for services).
MERGE_KEYS: dict[str, str] = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "env": "name",
    "volumes": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath",
    "imagePullSecrets": "name", "hostAliases": "ip", "ownerReferences": "uid", "conditions": "type",
    "topologySpreadConstraints": "topologyKey", "resourceClaims": "name", "schedulingGates": "name",
    "ports": "", "containerStatuses": "name", "initContainerStatuses": "name",
}
# Primitive lists with patchStrategy=merge: union instead of replace.
PRIMITIVE_MERGE: frozenset[str] = frozenset({"finalizers"})


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return json_copy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# --- RFC 6902 -------------------------------------------------------------------------------------

def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> Any:
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, list):
            cur = cur[int(p)]
        elif isinstance(cur, dict) and p in cur:
            cur = cur[p]
        else:
            raise invalid_patch(f"doc is missing path: /{'/'.join(parts)}")
    return cur


def _get(doc: Any, parts: list[str]) -> Any:
    if not parts:
        return doc
    parent, last = _parent(doc, parts), parts[-1]
    try:
        return parent[int(last)] if isinstance(parent, list) else parent[last]
    except (KeyError, IndexError, ValueError):
        raise invalid_patch(f"doc is missing path: /{'/'.join(parts)}") from None


def _remove(doc: Any, parts: list[str]) -> Any:
    parent, last = _parent(doc, parts), parts[-1]
    try:
        return parent.pop(int(last)) if isinstance(parent, list) else parent.pop(last)
    except (KeyError, IndexError, ValueError):
        raise invalid_patch(f"doc is missing path: /{'/'.join(parts)}") from None


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent, last = _parent(doc, parts), parts[-1]
    if isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            idx = int(last)
            if idx > len(parent):
                raise invalid_patch(f"index out of range: /{'/'.join(parts)}")
            parent.insert(idx, value)
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise invalid_patch(f"doc is missing path: /{'/'.join(parts)}")
    return doc


def json_patch(doc: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise bad_request("json patch must be a list of operations")
    doc = json_copy(doc)
    for op in ops:
        kind, parts = op.get("op"), _pointer(op.get("path", ""))
        if kind == "add":
            doc = _add(doc, parts, json_copy(op.get("value")))
        elif kind == "remove":
            _remove(doc, parts)
        elif kind == "replace":
            _get(doc, parts)  # must exist
            if parts:
                _remove(doc, parts)
            doc = _add(doc, parts, json_copy(op.get("value")))
        elif kind in ("move", "copy"):
            src = _pointer(op.get("from", ""))
            value = _remove(doc, src) if kind == "move" else json_copy(_get(doc, src))
            doc = _add(doc, parts, value)
        elif kind == "test":
            if _get(doc, parts) != op.get("value"):
                raise invalid_patch(f"testing value /{'/'.join(parts)} failed: test failed")
        else:
            raise bad_request(f"Unexpected kind: {kind}")
    return doc


# --- strategic merge patch ------------------------------------------------------------------------

def _merge_key(field: str, items: list[Any]) -> str | None:
    key = MERGE_KEYS.get(field)
    if key is None:
        return None
    if key == "":  # ports
        sample = next((i for i in items if isinstance(i, dict)), {})
        return "containerPort" if "containerPort" in sample else "port"
    return key


def _strategic_list(field: str, orig: list[Any], patch: list[Any], delete_prims: list[Any] | None) -> list[Any]:
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [i for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    if field in PRIMITIVE_MERGE:
        out = [i for i in orig if i not in (delete_prims or [])]
        out += [i for i in patch if i not in out]
        return out
    key = _merge_key(field, orig + patch)
    if key is None:
        return [strip_directives(i) for i in patch]
    out = [json_copy(i) for i in orig]
    for item in patch:
        if not isinstance(item, dict):
            continue
        idx = next((n for n, o in enumerate(out) if isinstance(o, dict) and o.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
        elif idx is None:
            out.append(strip_directives(item))
        else:
            out[idx] = strategic_merge(out[idx], item)
    return _normalize_order(out, orig, patch, key)


def _normalize_order(merged: list[Any], orig: list[Any], patch: list[Any], key: str) -> list[Any]:
    """strategicpatch's normalizeElementOrder + mergeSortedSlice: the patch's items in patch order,
    interleaved with the server-only items in their live order (a new item goes before them)."""
    def k(item: Any) -> Any:
        return item.get(key) if isinstance(item, dict) else None
    in_patch = {k(i) for i in patch if isinstance(i, dict)}
    live = {k(o): n for n, o in enumerate(orig)}
    patch_pos = {k(i): n for n, i in enumerate(patch)}
    right = sorted((i for i in merged if k(i) in in_patch), key=lambda i: patch_pos[k(i)])
    left = [i for i in merged if k(i) not in in_patch]
    out: list[Any] = []
    while left or right:
        if not right or (left and k(right[0]) in live and live[k(left[0])] < live[k(right[0])]):
            out.append(left.pop(0))
        else:
            out.append(right.pop(0))
    return out


def _apply_order(items: list[Any], order: list[Any], field: str) -> list[Any]:
    key = _merge_key(field, items)
    if key is None:
        return items
    pos = {(o.get(key) if isinstance(o, dict) else o): n for n, o in enumerate(order)}
    ranked = sorted(enumerate(items), key=lambda p: (pos.get(p[1].get(key) if isinstance(p[1], dict) else p[1],
                                                             len(pos) + p[0])))
    return [i for _, i in ranked]


def strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [strip_directives(i) for i in value]
    return value


def strategic_merge(orig: Any, patch: Any) -> Any:
    if not isinstance(patch, dict) or not isinstance(orig, dict):
        return strip_directives(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return strip_directives(patch)
    if directive == "delete":
        return None
    out = dict(orig)
    orders: dict[str, list[Any]] = {}
    for k, v in patch.items():
        if k.startswith("$setElementOrder/"):
            orders[k.split("/", 1)[1]] = v
            continue
        if k.startswith("$"):
            continue
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict):
            merged = strategic_merge(out.get(k) if isinstance(out.get(k), dict) else {}, v)
            if merged is None:
                out.pop(k, None)
            else:
                out[k] = merged
        elif isinstance(v, list):
            prior: list[Any] = out[k] if isinstance(out.get(k), list) else []
            out[k] = _strategic_list(k, prior, v, patch.get(f"$deleteFromPrimitiveList/{k}"))
        else:
            out[k] = v
    for k, prims in patch.items():  # deletions with no accompanying list in the patch
        if k.startswith("$deleteFromPrimitiveList/"):
            field = k.split("/", 1)[1]
            if field not in patch and isinstance(out.get(field), list):
                out[field] = [i for i in out[field] if i not in prims]
    for field, order in orders.items():
        if isinstance(out.get(field), list):
            out[field] = _apply_order(out[field], order, field)
    if "$retainKeys" in patch:
        keep = set(patch["$retainKeys"])
        out = {k: v for k, v in out.items() if k in keep}
    return out
