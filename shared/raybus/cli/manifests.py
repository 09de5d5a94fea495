"""Reading a manifest file for the CLI and judging it as `kubectl apply` would, one line per problem.

What the API server refuses before any controller sees an object, the CLI refuses too, with the
same wording: a field the CRD schema does not know is a strict decoding error (kubectl's default
`--validate=strict`: `unknown field "spec.foo"`), and a value of the wrong JSON type is
apiextensions' `Invalid value: "string": <path> in body must be of type integer`. Both are judged
on the CRD schemas raybus installs (`raybus.api.crdgen`, the same ones `make crds` writes), so pod
templates are checked field by field as KubeRay's CRDs have them checked. Each line starts with
`FILE:LINE:` where the YAML has the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from raybus.api.crdgen import object_schema
from raybus.api.load import KINDS, RayAny, is_ray_object, parse_object

Schema = dict[str, Any]
Path_ = tuple[str | int, ...]
_TOP = ("apiVersion", "kind", "metadata")
_TYPES: dict[str, tuple[type, ...]] = {"object": (dict,), "array": (list,), "string": (str,),
                                       "integer": (int,), "number": (int, float), "boolean": (bool,)}


class ManifestError(Exception):
    """The manifest cannot be used; `lines` says why, one problem per line."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


@dataclass(frozen=True)
class Problem:
    path: Path_
    message: str


@cache
def _schema(kind: str) -> Schema:
    return object_schema(KINDS[kind])


@cache
def _meta_fields() -> frozenset[str]:
    """metav1.ObjectMeta's JSON field names (the API server decodes metadata by the Go struct)."""
    from kubernetes_asyncio.client import V1ObjectMeta

    fields: dict[str, str] = getattr(V1ObjectMeta, "attribute_map")  # noqa: B009 (untyped in the stubs)
    return frozenset(fields.values())


def dotted(path: Path_) -> str:
    """A field path as the API server prints it: `spec.workerGroupSpecs[0].replicas`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _json_type(v: Any) -> str:
    """A value's JSON type as OpenAPI validation names it in messages."""
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer()):
        return "integer"
    names: dict[type, str] = {float: "number", str: "string", dict: "object", list: "array"}
    return names.get(type(v), "null")


def _wrong_type(value: Any, schema: Schema) -> str | None:
    if schema.get("x-kubernetes-int-or-string"):
        return None if isinstance(value, int | str) and not isinstance(value, bool) else "integer,string"
    expected = schema.get("type")
    allowed = _TYPES.get(expected or "")
    if allowed is None:
        return None
    ok = isinstance(value, allowed) and not (isinstance(value, bool) and expected != "boolean")
    if expected == "integer" and isinstance(value, float) and value.is_integer():
        ok = True
    return None if ok else str(expected)


def check(value: Any, schema: Schema, path: Path_, out: list[Problem], *, root: bool = False) -> None:
    """Unknown fields and wrong JSON types, walked as apiextensions prunes and validates."""
    if value is None:
        return  # a null of a non-nullable field is dropped by the API server, not refused
    expected = _wrong_type(value, schema)
    if expected is not None:
        where, got = dotted(path), _json_type(value)
        out.append(Problem(path, f'{where}: Invalid value: "{got}": {where} in body must be of type '
                                 f'{expected}: "{got}"'))
        return
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            check(item, schema["items"], (*path, i), out)
        return
    if not isinstance(value, dict):
        return
    props: dict[str, Schema] = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    embedded = root or schema.get("x-kubernetes-embedded-resource", False)
    for key, sub_value in value.items():
        sub = props.get(key)
        if embedded and key == "metadata" and isinstance(sub_value, dict):
            out.extend(Problem((*path, key, k), f'strict decoding error: unknown field "{dotted((*path, key, k))}"')
                       for k in sub_value if k not in _meta_fields())
        elif embedded and key in _TOP or root and key == "status":
            continue  # apiVersion/kind are never pruned; status is the controller's to write
        elif sub is not None:
            check(sub_value, sub, (*path, key), out)
        elif isinstance(additional, dict):
            check(sub_value, additional, (*path, key), out)
        elif not (additional is True or schema.get("x-kubernetes-preserve-unknown-fields")):
            out.append(Problem((*path, key), f'strict decoding error: unknown field "{dotted((*path, key))}"'))


def _line(node: yaml.Node, path: Path_) -> int:
    """1-based line of the deepest node of `path` that the YAML has (the document's start if none)."""
    line = node.start_mark.line + 1
    for part in path:
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            found = [(k, v) for k, v in node.value if getattr(k, "value", None) == part]
            if not found:
                break
            key, node = found[0]
            line = key.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def read_documents(path: Path) -> list[tuple[Any, yaml.Node]]:
    """Every YAML document of the file with its node (for line numbers); ManifestError if the file
    cannot be read or is not YAML."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ManifestError([f"{path}: no such file"]) from None
    except IsADirectoryError:
        raise ManifestError([f"{path}: is a directory, not a manifest file"]) from None
    except UnicodeDecodeError:
        raise ManifestError([f"{path}: not a text file"]) from None
    except OSError as exc:
        raise ManifestError([f"{path}: {exc.strerror or exc}"]) from None
    loader = yaml.SafeLoader(text)
    docs: list[tuple[Any, yaml.Node]] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                docs.append((loader.construct_document(node), node))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ManifestError([f"{where}: YAML error: {exc.problem or exc.context}"]) from None
    except yaml.YAMLError as exc:
        raise ManifestError([f"{path}: YAML error: {exc}"]) from None
    finally:
        loader.dispose()
    return docs


def _pydantic_problems(exc: ValidationError) -> list[Problem]:
    out = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if isinstance(p, int | str))
        out.append(Problem(loc, f"{dotted(loc)}: Invalid value: {json.dumps(err['input'], default=str)}: "
                                f"{err['msg']}"))
    return out[:1]  # a union's alternatives each report the same field: the first says it


def load(path: Path) -> list[RayAny]:
    """The ray.io objects of a manifest file, checked as the API server would check them; other
    kinds are skipped, as `raybus render` previews Ray objects only."""
    lines: list[str] = []
    objects: list[RayAny] = []
    for doc, node in read_documents(path):
        if not is_ray_object(doc):
            continue
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        name = meta.get("name") or meta.get("generateName") or ""
        label = f'{doc["kind"]} "{name}"'
        problems: list[Problem] = []
        check(doc, _schema(doc["kind"]), (), problems, root=True)
        if not problems:
            try:
                objects.append(parse_object(doc))
            except ValidationError as exc:
                problems = _pydantic_problems(exc)
        lines += [f"{path}:{_line(node, p.path)}: {label}: {p.message}" for p in problems]
    if lines:
        raise ManifestError(lines)
    return objects
