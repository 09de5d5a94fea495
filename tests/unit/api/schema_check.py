"""A small checker for the subset of structural OpenAPI v3 our CRDs use, strict about unknown fields
(like ``kubectl apply --validate=strict``). Returns problems instead of raising."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]
_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
}


def check(value: Any, schema: Schema, path: str = "") -> list[str]:
    if value is None:
        return []  # nullable, or dropped by the API server before validation (structural schemas)
    if schema.get("x-kubernetes-int-or-string"):
        ok = isinstance(value, (int, str)) and not isinstance(value, bool)
        return [] if ok else [f"{path}: must be integer or string"]
    kind = schema.get("type")
    if kind is None:
        return [f"{path}: schema has no type"]
    if not isinstance(value, _TYPES[kind]) or (kind in ("integer", "number") and isinstance(value, bool)):
        return [f"{path}: expected {kind}, got {type(value).__name__}"]
    errs: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        errs.append(f"{path}: unsupported value {value!r}")
    if "minimum" in schema and value < schema["minimum"]:
        errs.append(f"{path}: {value} < minimum {schema['minimum']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errs.append(f"{path}: fewer than {schema['minItems']} items")
        for i, item in enumerate(value):
            errs += check(item, schema["items"], f"{path}[{i}]")
    if isinstance(value, dict):
        # ObjectMeta is validated by the API server itself; CRDs only say "type: object" for it.
        if schema.get("x-kubernetes-preserve-unknown-fields") or path == ".metadata":
            return errs
        props: dict[str, Schema] = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        # the API server applies defaults before it validates: a required field with one may be absent
        errs += [f"{path}: missing required field {r!r}" for r in schema.get("required", [])
                 if r not in value and "default" not in props.get(r, {})]
        for key, item in value.items():
            if key in props:
                errs += check(item, props[key], f"{path}.{key}")
            elif extra is not None:
                errs += check(item, extra, f"{path}.{key}")
            else:
                errs.append(f"{path}: unknown field {key!r}")
    return errs


def walk_schemas(schema: Schema, path: str = "") -> list[tuple[str, Schema]]:
    """Every schema node with its path, for structural-rule assertions."""
    out = [(path, schema)]
    for key, sub in schema.get("properties", {}).items():
        out += walk_schemas(sub, f"{path}.{key}")
    if isinstance(schema.get("additionalProperties"), dict):
        out += walk_schemas(schema["additionalProperties"], f"{path}.*")
    if "items" in schema:
        out += walk_schemas(schema["items"], f"{path}[]")
    return out
