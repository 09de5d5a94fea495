"""CRD structural-schema handling: prune unknown fields, apply defaults, validate (like apiextensions).

Order as upstream: prune (ObjectMeta too) -> default -> validate -> CEL rules (x-kubernetes-validations,
skipped with a "<nil>" cause when the schema errors block them, as upstream). Not covered: formats,
list-type uniqueness, CEL beyond cel.py's subset.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from . import errors
from .cel import MISSING, Unsupported, compile_rule, evaluate, uses_old_self
from .decode import _fields
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
            if (root or embedded) and k == "metadata" and isinstance(v, dict):
                meta_fields = _fields("V1ObjectMeta") or {}
                out[k] = {mk: mv for mk, mv in v.items() if mk in meta_fields}
                unknown.extend(_join(_join(path, k), mk) for mk in v if mk not in meta_fields)
            elif (root or embedded) and k in _TOP:
                out[k] = v  # apiVersion/kind are never pruned by the CRD schema
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


_DEFAULTS: dict[int, tuple[Schema, tuple[tuple[str, Any], ...]]] = {}


def _defaults(schema: Schema) -> tuple[tuple[str, Any], ...]:
    """(property, default) of the properties that have one, per schema node: a pod template's
    schema has hundreds of properties and a handful of defaults, and every write walks it."""
    hit = _DEFAULTS.get(id(schema))
    if hit is None or hit[0] is not schema:
        props: dict[str, Schema] = schema.get("properties") or {}
        hit = _DEFAULTS[id(schema)] = (schema, tuple((k, sub["default"]) for k, sub in props.items()
                                                     if "default" in sub))
    return hit[1]


def default(value: Any, schema: Schema) -> None:
    if isinstance(value, dict):
        for k, fallback in _defaults(schema):
            if k not in value:
                value[k] = copy.deepcopy(fallback)
        props: dict[str, Schema] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for k, v in value.items():
            sub = props.get(k)
            if sub is not None:
                default(v, sub)
            elif isinstance(additional, dict):
                default(v, additional)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for v in value:
            default(v, schema["items"])


def _lit(v: Any) -> str:
    return json.dumps(v)


def _type_name(v: Any) -> str:
    """The JSON type of a value as OpenAPI validation names it in messages."""
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "integer" if v.is_integer() else "number"
    names: dict[type, str] = {str: "string", dict: "object", list: "array"}
    return names.get(type(v), "null")


_TYPES: dict[str, tuple[type, ...]] = {"object": (dict,), "array": (list,), "string": (str,), "integer": (int,),
                                       "number": (int, float), "boolean": (bool,)}


def validate(value: Any, schema: Schema, path: str, causes: list[Cause]) -> None:
    if value is None:
        return
    stype = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            causes.append(("FieldValueTypeInvalid", path, (f'Invalid value: "{_type_name(value)}": {path} in body must '
                           f'be of type integer,string: "{_type_name(value)}"')))
        if not isinstance(value, str):
            return
        stype = "string"  # a string's own checks still apply: the Quantity pattern
    if stype in _TYPES:
        ok = isinstance(value, _TYPES[stype]) and not (stype in ("integer", "number") and isinstance(value, bool))
        if stype == "integer" and isinstance(value, float) and value.is_integer():
            ok = True
        if not ok:
            causes.append(("FieldValueTypeInvalid", path, (f'Invalid value: "{_type_name(value)}": {path} in body must '
                           f'be of type {stype}: "{_type_name(value)}"')))
            return
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(_lit(e) for e in schema["enum"])
        causes.append(("FieldValueNotSupported", path, (f"Unsupported value: {_lit(value)}: supported values: "
                       f"{supported}")))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            causes.append(("FieldValueInvalid", path, (f"Invalid value: {_lit(value)}: {path} in body should be "
                           f"greater than or equal to {schema['minimum']}")))
        if "maximum" in schema and value > schema["maximum"]:
            causes.append(("FieldValueInvalid", path, (f"Invalid value: {_lit(value)}: {path} in body should be "
                           f"less than or equal to {schema['maximum']}")))
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            causes.append(("FieldValueTooLong", path, f"Too long: may not be more than {schema['maxLength']} bytes"))
        if "minLength" in schema and len(value) < schema["minLength"]:
            causes.append(("FieldValueInvalid", path, (f"Invalid value: {_lit(value)}: {path} in body should be at "
                           f"least {schema['minLength']} chars long")))
        if "pattern" in schema and not re.search(schema["pattern"], value):
            causes.append(("FieldValueInvalid", path, (f"Invalid value: {_lit(value)}: {path} in body should match "
                           f"'{schema['pattern']}'")))
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
            causes.append(("FieldValueTooMany", path, (f"Too many: {len(value)}: must have at most "
                           f"{schema['maxItems']} items")))
        if "minItems" in schema and len(value) < schema["minItems"]:
            causes.append(("FieldValueInvalid", path, (f"Invalid value: {len(value)}: {path} in body should have at "
                           f"least {schema['minItems']} items")))
        if isinstance(schema.get("items"), dict):
            for i, v in enumerate(value):
                validate(v, schema["items"], f"{path}[{i}]", causes)


# Schema error types that keep CEL rules from running (apiextensions' hasBlockingErr).
_BLOCKING = frozenset({"FieldValueNotSupported", "FieldValueRequired", "FieldValueTooLong", "FieldValueTooMany",
                       "FieldValueTypeInvalid"})
_NOT_CHECKED = ("FieldValueInvalid", "<nil>", ('Invalid value: "null": some validation rules were not checked '
                "because the object was invalid; correct the existing errors to complete validation"))
_HAS_CEL: dict[int, tuple[Schema, bool]] = {}


def _has_cel(schema: Any) -> bool:
    if isinstance(schema, dict):
        return "x-kubernetes-validations" in schema or any(_has_cel(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_has_cel(v) for v in schema)
    return False


def has_cel(schema: Schema) -> bool:
    hit = _HAS_CEL.get(id(schema))
    if hit is None or hit[0] is not schema:
        hit = _HAS_CEL[id(schema)] = (schema, _has_cel(schema))
    return hit[1]


def cel_validate(value: Any, schema: Schema, path: str, causes: list[Cause], old: Any = MISSING) -> None:
    """Evaluate x-kubernetes-validations; transition rules (oldSelf) only where an old value exists
    (old values are correlated through object properties, not through array items)."""
    if value is None:
        return
    for rule in schema.get("x-kubernetes-validations") or []:
        text = rule.get("rule", "")
        try:
            compile_rule(text)
        except Unsupported:
            continue  # outside the evaluator's subset: not enforced (README)
        transition = uses_old_self(text)
        if transition and old is MISSING:
            continue
        if not evaluate(text, value, old if transition else MISSING):
            message = rule.get("message") or f"failed rule: {text}"
            causes.append(("FieldValueInvalid", rule.get("fieldPath") or path or "<nil>",
                           f'Invalid value: "{schema.get("type", "object")}": {message}'))
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for k, v in value.items():
            sub = props.get(k) if k in props else additional if isinstance(additional, dict) else None
            # subtrees without a rule (pod templates) are not walked
            if sub is not None and not (not path and k == "metadata") and has_cel(sub):
                child_old = old.get(k, MISSING) if isinstance(old, dict) else MISSING
                cel_validate(v, sub, _join(path, k), causes, child_old)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict) and has_cel(schema["items"]):
        for i, v in enumerate(value):
            cel_validate(v, schema["items"], f"{path}[{i}]", causes)


def apply_schema(rt: ResourceType, obj: dict[str, Any], *, field_validation: str = "Ignore",
                 warnings: list[str] | None = None, old: dict[str, Any] | None = None) -> dict[str, Any]:
    """Returns the pruned+defaulted object; raises 400 (strict unknown fields) or 422 (invalid).

    field_validation: Strict (unknown fields -> 400), Warn (-> `warnings`), Ignore (dropped silently)."""
    schema = rt.schema
    if not schema:
        return obj
    unknown: list[str] = []
    out: dict[str, Any] = prune(obj, schema, "", unknown, root=True)
    unknown.sort()
    if unknown and field_validation == "Strict":
        listed = ", ".join(f'unknown field "{u}"' for u in unknown)
        raise errors.bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: strict '
                                 f'decoding error: {listed}')
    if unknown and field_validation == "Warn" and warnings is not None:
        warnings.extend(f'unknown field "{u}"' for u in unknown)
    default(out, schema)
    causes: list[Cause] = []
    validate(out, schema, "", causes)
    if has_cel(schema):
        if any(c[0] in _BLOCKING for c in causes):
            causes.append(_NOT_CHECKED)
        else:
            cel_validate(out, schema, "", causes, old if old is not None else MISSING)
    if causes:
        raise errors.invalid(rt.kind, rt.group, obj.get("metadata", {}).get("name", ""), causes)
    return out
