"""Decoding a request body into a built-in type, as kube-apiserver's JSON decoder does.

Upstream a built-in object is unmarshalled into its Go struct: fields the struct lacks are dropped
(reported per `fieldValidation`: Strict -> 400 "strict decoding error", Warn -> a Warning header,
the default, Ignore -> nothing), scalars of the wrong JSON type and malformed resource quantities are
a 400 "cannot be handled as a <Kind>". The struct layouts come from kubernetes-asyncio's generated
models (`openapi_types` / `attribute_map`), which mirror the Go types field for field.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from kubernetes_asyncio.client import models

from . import errors
from .quantity import parse_error
from .resources import ResourceType

# Model classes whose names are not V<version><Kind> ((group, plural) -> name in client.models).
_MODELS = {("", "events"): "CoreV1Event", ("events.k8s.io", "events"): "EventsV1Event"}
# Fields whose values are resource.Quantity (strings or JSON numbers), wherever they appear.
_QUANTITY_FIELDS = frozenset({"limits", "requests", "overhead", "sizeLimit", "divisor", "capacity", "allocatable"})
_SCALARS: dict[str, tuple[tuple[type, ...], str]] = {
    "str": ((str,), "string"), "int": ((int,), "int32"), "bool": ((bool,), "bool"),
    "float": ((int, float), "float64"), "datetime": ((str,), "Time"),
}


@cache
def _fields(model: str) -> dict[str, str] | None:
    cls = getattr(models, model, None)
    if cls is None:
        return None
    return {cls.attribute_map[attr]: typ for attr, typ in cls.openapi_types.items()}


def model_for(rt: ResourceType) -> str | None:
    if rt.custom:
        return None
    name = _MODELS.get((rt.group, rt.plural)) or f"{rt.version.upper()}{rt.kind}"
    return name if _fields(name) is not None else None


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), "value")


class _Decoder:
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.unknown: list[str] = []
        self.error: str | None = None

    def value(self, value: Any, typ: str, path: str, name: str) -> Any:
        if value is None:
            return None
        if name in _QUANTITY_FIELDS and typ in ("str", "dict(str, str)"):
            for q in (value.values() if isinstance(value, dict) else [value]):
                err = parse_error(q)
                if err and self.error is None:
                    self.error = err
            return value
        if typ.startswith("list["):
            if not isinstance(value, list):
                return self._mismatch(value, "[]" + typ[5:-1], path)
            return [self.value(v, typ[5:-1], f"{path}[{i}]", name) for i, v in enumerate(value)]
        if typ.startswith("dict("):
            if not isinstance(value, dict):
                return self._mismatch(value, "map", path)
            inner = typ[typ.index(",") + 1:-1].strip()
            return {k: self.value(v, inner, f"{path}[{k}]", name) for k, v in value.items()}
        if typ in _SCALARS:
            types, go = _SCALARS[typ]
            ok = isinstance(value, types) and not (typ in ("int", "float") and isinstance(value, bool))
            if typ == "int" and isinstance(value, float) and value.is_integer():
                ok = True
            return value if ok else self._mismatch(value, go, path)
        fields = _fields(typ)
        if fields is None:  # "object": IntOrString, RawExtension, free-form
            return value
        if not isinstance(value, dict):
            return self._mismatch(value, typ, path)
        out = {}
        for key, sub in value.items():
            sub_typ = fields.get(key)
            child = f"{path}.{key}" if path else key
            if sub_typ is None:
                self.unknown.append(child)
                continue
            out[key] = self.value(sub, sub_typ, child, key)
        return out

    def _mismatch(self, value: Any, go_type: str, path: str) -> Any:
        if self.error is None:
            dotted = ".".join(p.split("[")[0] for p in path.split("."))
            self.error = (f"json: cannot unmarshal {_json_type(value)} into Go struct field {self.kind}.{dotted} "
                          f"of type {go_type}")
        return value


def decode_builtin(rt: ResourceType, obj: dict[str, Any], *, field_validation: str,
                   warnings: list[str] | None) -> dict[str, Any]:
    """The object as the Go struct would hold it (unknown fields dropped); raises 400 like the decoder."""
    model = model_for(rt)
    if model is None:
        return obj
    dec = _Decoder(rt.kind)
    top = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    out: dict[str, Any] = dec.value(top, model, "", "")
    prefix = f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
    if dec.error is not None:
        raise errors.bad_request(prefix + dec.error)
    if dec.unknown:
        if field_validation == "Strict":
            listed = ", ".join(f'unknown field "{u}"' for u in dec.unknown)
            raise errors.bad_request(f"{prefix}strict decoding error: {listed}")
        if field_validation == "Warn" and warnings is not None:
            warnings.extend(f'unknown field "{u}"' for u in dec.unknown)
    for key in ("apiVersion", "kind"):
        if key in obj:
            out[key] = obj[key]
    return out
