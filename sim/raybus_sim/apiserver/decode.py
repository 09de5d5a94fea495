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


# A parsed openapi type: ("list"|"dict", inner) | ("scalar", (types, go name, is int)) | ("model", fields)
# | ("any", None).
_Node = tuple[str, Any]


@cache
def _node(typ: str) -> _Node:
    if typ.startswith("list["):
        return ("list", typ[5:-1])
    if typ.startswith("dict("):
        return ("dict", typ[typ.index(",") + 1:-1].strip())
    if typ in _SCALARS:
        types, go = _SCALARS[typ]
        return ("scalar", (types, go, typ in ("int", "float")))
    fields = _fields(typ)
    return ("model", fields) if fields is not None else ("any", None)


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
    names: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return names.get(type(value), "value")


class _Decoder:
    """One walk over the body along the Go type, allocating nothing on the happy path (bodies of thousands
    of pods pass through here): collects unknown fields (as key paths) and the first decode error."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.stack: list[str | int] = []
        self.unknown: list[tuple[str | int, ...]] = []
        self.error: str | None = None

    def path(self, stack: tuple[str | int, ...] | list[str | int] | None = None) -> str:
        out = ""
        for part in self.stack if stack is None else stack:
            if isinstance(part, int):
                out += f"[{part}]"
            elif part.startswith("["):
                out += part
            else:
                out += f".{part}" if out else part
        return out

    def walk(self, value: Any, typ: str, name: str) -> None:
        if name in _QUANTITY_FIELDS and typ in ("str", "dict(str, str)"):
            for q in (value.values() if isinstance(value, dict) else [value]):
                err = parse_error(q)
                if err and self.error is None:
                    self.error = err
            return
        tag, arg = _node(typ)
        if tag == "model":
            if type(value) is not dict:
                self._mismatch(value, typ)
                return
            stack = self.stack
            for key, sub in value.items():
                sub_typ = arg.get(key)
                if sub_typ is None:
                    self.unknown.append((*stack, key))
                elif sub is None or (sub_typ == "str" and type(sub) is str):
                    continue  # the common case, without a call
                else:
                    stack.append(key)
                    self.walk(sub, sub_typ, key)
                    stack.pop()
        elif tag == "scalar":
            types, go, numeric = arg
            if type(value) in types and not (numeric and type(value) is bool):
                return
            if not (go == "int32" and isinstance(value, float) and value.is_integer()):
                self._mismatch(value, go)
        elif tag == "list":
            if type(value) is not list:
                self._mismatch(value, "[]" + arg)
                return
            for i, v in enumerate(value):
                if v is not None:
                    self.stack.append(i)
                    self.walk(v, arg, name)
                    self.stack.pop()
        elif tag == "dict":
            if type(value) is not dict:
                self._mismatch(value, "map")
            elif arg == "str":
                for k, v in value.items():
                    if type(v) is not str:
                        self.stack.append(f"[{k}]")
                        self._mismatch(v, "string")
                        self.stack.pop()
            else:
                for k, v in value.items():
                    if v is not None:
                        self.stack.append(f"[{k}]")
                        self.walk(v, arg, name)
                        self.stack.pop()
        # "any": IntOrString, RawExtension, free-form

    def _mismatch(self, value: Any, go_type: str) -> None:
        if self.error is None:
            dotted = ".".join(str(p) for p in self.stack if isinstance(p, str) and not p.startswith("["))
            self.error = (f"json: cannot unmarshal {_json_type(value)} into Go struct field {self.kind}.{dotted} "
                          f"of type {go_type}")


def _drop(obj: Any, path: tuple[str | int, ...]) -> None:
    for part in path[:-1]:
        obj = obj[part[1:-1]] if isinstance(part, str) and part.startswith("[") else obj[part]
    obj.pop(path[-1], None)


def decode_builtin(rt: ResourceType, obj: dict[str, Any], *, field_validation: str,
                   warnings: list[str] | None) -> dict[str, Any]:
    """The object as the Go struct would hold it (unknown fields dropped, in place: the body is the
    request's own); raises 400 like the decoder."""
    model = model_for(rt)
    if model is None:
        return obj
    dec = _Decoder(rt.kind)
    fields = _fields(model) or {}
    for key, sub in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        if key not in fields:
            dec.unknown.append((key,))
        elif sub is not None:
            dec.stack.append(key)
            dec.walk(sub, fields[key], key)
            dec.stack.pop()
    prefix = f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
    if dec.error is not None:
        raise errors.bad_request(prefix + dec.error)
    if dec.unknown:
        paths = [dec.path(u) for u in dec.unknown]
        if field_validation == "Strict":
            listed = ", ".join(f'unknown field "{u}"' for u in paths)
            raise errors.bad_request(f"{prefix}strict decoding error: {listed}")
        if field_validation == "Warn" and warnings is not None:
            warnings.extend(f'unknown field "{u}"' for u in paths)
        for u in dec.unknown:
            _drop(obj, u)
    return obj
