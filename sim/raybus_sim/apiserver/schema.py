"""CRD structural-schema handling: prune unknown fields, apply defaults, validate (like apiextensions).

Order as upstream: prune -> default -> validate. Not covered: CEL (x-kubernetes-validations), formats,
list-type uniqueness, ObjectMeta pruning.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from . import errors
from .resources import ResourceType

Schema = dict[str, Any]
Cause = tuple[str, str, str]
_TOP = ("apiVersion", "kind", "metadata")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def prune(value: Any, schema: Schema, path: str, unknown: list[str], *, root: bool = False) -> Any:
    if isinstance(value, dict):
        props: dict[str, Schema] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        keep_unknown = schema.get("x-kubernetes-preserve-unknown-fields", False)
        embedded = schema.get("x-kubernetes-embedded-resource", False)
        out = {}
        for k, v in value.items():
            sub = props.get(k)
            if (root or embedded) and k in _TOP:
                out[k] = v  # apiVersion/kind/metadata are never pruned by the CRD schema
            elif sub is not None:
                if v is None and not sub.get("nullable"):
                    continue  # nulls of non-nullable fields are dropped, not rejected
                out[k] = prune(v, sub, _join(path, k), unknown)
            elif isinstance(additional, dict):
                out[k] = prune(v, additional, _join(path, k), unknown)
            elif additional is True or keep_unknown:
                out[k] = v
            else:
                unknown.append(_join(path, k))
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [prune(v, schema["items"], f"{path}[{i}]", unknown) for i, v in enumerate(value)]
    return value


def default(value: Any, schema: Schema) -> None:
    if isinstance(value, dict):
        for k, sub in (schema.get("properties") or {}).items():
            if k not in value and "default" in sub:
                value[k] = copy.deepcopy(sub["default"])
            if k in value:
                default(value[k], sub)
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            for v in value.values():
                default(v, additional)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for v in value:
            default(v, schema["items"])


def _lit(v: Any) -> str:
    return json.dumps(v)


_TYPES: dict[str, tuple[type, ...]] = {"object": (dict,), "array": (list,), "string": (str,), "integer": (int,),
                                       "number": (int, float), "boolean": (bool,)}


def validate(value: Any, schema: Schema, path: str, causes: list[Cause]) -> None:
    if value is None:
        return
    stype = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            causes.append(("FieldValueTypeInvalid", path, f"Invalid value: {_lit(value)}: {path} in body must be of "
                           f"type integer,string: {_lit(value)}"))
        return
    if stype in _TYPES:
        ok = isinstance(value, _TYPES[stype]) and not (stype in ("integer", "number") and isinstance(value, bool))
        if stype == "integer" and isinstance(value, float) and value.is_integer():
            ok = True
        if not ok:
            causes.append(("FieldValueTypeInvalid", path, f"Invalid value: {_lit(value)}: {path} in body must be "
                           f"of type {stype}: {_lit(value)}"))
            return
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_lit(e) for e in schema["enum"])
        causes.append(("FieldValueNotSupported", path, f"Unsupported value: {_lit(value)}: supported values: "
                       f"{supported}"))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            causes.append(("FieldValueInvalid", path, f"Invalid value: {_lit(value)}: {path} in body should be "
                           f"greater than or equal to {schema['minimum']}"))
        if "maximum" in schema and value > schema["maximum"]:
            causes.append(("FieldValueInvalid", path, f"Invalid value: {_lit(value)}: {path} in body should be "
                           f"less than or equal to {schema['maximum']}"))
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            causes.append(("FieldValueTooLong", path, f"Too long: may not be more than {schema['maxLength']} bytes"))
        if "minLength" in schema and len(value) < schema["minLength"]:
            causes.append(("FieldValueInvalid", path, f"Invalid value: {_lit(value)}: {path} in body should be at "
                           f"least {schema['minLength']} chars long"))
        if "pattern" in schema and not re.search(schema["pattern"], value):
            causes.append(("FieldValueInvalid", path, f"Invalid value: {_lit(value)}: {path} in body should match "
                           f"'{schema['pattern']}'"))
    if isinstance(value, dict):
        for req in schema.get("required") or []:
            if req not in value:
                causes.append(("FieldValueRequired", _join(path, req), "Required value"))
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for k, v in value.items():
            if k in props:
                if not path and k == "metadata":
                    continue
                validate(v, props[k], _join(path, k), causes)
            elif isinstance(additional, dict):
                validate(v, additional, _join(path, k), causes)
    elif isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            causes.append(("FieldValueTooMany", path, f"Too many: {len(value)}: must have at most "
                           f"{schema['maxItems']} items"))
        if "minItems" in schema and len(value) < schema["minItems"]:
            causes.append(("FieldValueInvalid", path, f"Invalid value: {len(value)}: {path} in body should have at "
                           f"least {schema['minItems']} items"))
        if isinstance(schema.get("items"), dict):
            for i, v in enumerate(value):
                validate(v, schema["items"], f"{path}[{i}]", causes)


def apply_schema(rt: ResourceType, obj: dict[str, Any], *, strict: bool) -> dict[str, Any]:
    """Returns the pruned+defaulted object; raises 400 (strict unknown fields) or 422 (invalid)."""
    schema = rt.schema
    if not schema:
        return obj
    unknown: list[str] = []
    out: dict[str, Any] = prune(obj, schema, "", unknown, root=True)
    if unknown and strict:
        listed = ", ".join(f'unknown field "{u}"' for u in unknown)
        raise errors.bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: strict '
                                 f'decoding error: {listed}')
    default(out, schema)
    causes: list[Cause] = []
    validate(out, schema, "", causes)
    if causes:
        raise errors.invalid(rt.kind, rt.group, obj.get("metadata", {}).get("name", ""), causes)
    return out
