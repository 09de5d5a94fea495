"""Label and field selectors compiled once per request into plain predicates."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .errors import bad_request

Pred = Callable[[dict[str, Any]], bool]
_TRUE: Pred = lambda obj: True

# key (in|notin) (a,b) | !key | key | key(=|==|!=)value ; requirements separated by commas outside parens.
_SET_RE = re.compile(r"^\s*([^\s!=(),]+)\s+(in|notin)\s*\(([^)]*)\)\s*$")
_EQ_RE = re.compile(r"^\s*([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)\s*$")
_EXISTS_RE = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*$")


def _split(selector: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p.strip()]


def _label_req(req: str) -> Callable[[dict[str, str]], bool]:
    if m := _SET_RE.match(req):
        key, op, raw = m.group(1), m.group(2), m.group(3)
        values = frozenset(v.strip() for v in raw.split(",") if v.strip())
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if m := _EQ_RE.match(req):
        key, op, value = m.group(1), m.group(2), m.group(3)
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if m := _EXISTS_RE.match(req):
        neg, key = m.group(1), m.group(2)
        if neg:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise bad_request(f"unable to parse requirement: {req!r}")


def compile_label_selector(selector: str | None) -> Pred:
    if not selector or not selector.strip():
        return _TRUE
    reqs = [_label_req(r) for r in _split(selector)]

    def pred(obj: dict[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(r(labels) for r in reqs)

    return pred


def match_label_selector_obj(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """metav1.LabelSelector (matchLabels/matchExpressions) against a label map; None/{} matches all."""
    if not selector:
        return True
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _field_getter(plural: str, group: str, path: str) -> Callable[[dict[str, Any]], str]:
    # Upstream every resource supports metadata.name/namespace; a few add their own fields.
    extra = {
        ("", "pods"): {"status.phase", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                       "spec.serviceAccountName", "status.podIP", "status.nominatedNodeName"},
        ("", "events"): {"involvedObject.kind", "involvedObject.name", "involvedObject.namespace",
                         "involvedObject.uid", "reason", "type", "source"},
        ("", "secrets"): {"type"},
        ("", "namespaces"): {"status.phase"},
        ("batch", "jobs"): {"status.successful"},
    }
    if path not in ("metadata.name", "metadata.namespace") and path not in extra.get((group, plural), ()):
        raise bad_request(f'"{path}" is not a known field selector: only "metadata.name", "metadata.namespace"')
    keys = path.split(".")

    def get(obj: dict[str, Any]) -> str:
        cur: Any = obj
        for k in keys:
            cur = cur.get(k) if isinstance(cur, dict) else None
        return "" if cur is None else str(cur)

    return get


def compile_field_selector(selector: str | None, *, plural: str, group: str) -> Pred:
    if not selector or not selector.strip():
        return _TRUE
    reqs: list[Pred] = []
    for raw in selector.split(","):
        m = re.match(r"^\s*([^!=\s]+)\s*(==|=|!=)\s*(.*?)\s*$", raw)
        if not m:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{raw}'")
        getter, op, value = _field_getter(plural, group, m.group(1)), m.group(2), m.group(3)
        reqs.append(_field_req(getter, op, value))
    return lambda obj: all(r(obj) for r in reqs)


def _field_req(getter: Callable[[dict[str, Any]], str], op: str, value: str) -> Pred:
    if op == "!=":
        return lambda obj: getter(obj) != value
    return lambda obj: getter(obj) == value


def field_selector_name(selector: str | None) -> str | None:
    """Fast path: `metadata.name=x` (kubectl get -w NAME) lets the store skip a scan."""
    if selector and "," not in selector:
        m = re.match(r"^\s*metadata\.name\s*==?\s*(\S+)\s*$", selector)
        if m:
            return m.group(1)
    return None
