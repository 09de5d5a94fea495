"""Label and field selectors compiled once per request into plain predicates."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .errors import bad_request

Pred = Callable[[dict[str, Any]], bool]
_TRUE: Pred = lambda obj: True

# --- label selectors: a port of apimachinery's labels.Parser (lexer, grammar and error messages) -------
_SPECIAL = "=!(),><"
_SYMBOLS = {"!": "!", "!=": "!=", "(": "(", ")": ")", ",": ",", "=": "=", "==": "==", ">": ">", "<": "<"}
_ID, _EOS, _IN, _NOTIN = "ID", "EOS", "in", "notin"


def _lex(selector: str) -> list[tuple[str, str]]:
    toks: list[tuple[str, str]] = []
    i, n = 0, len(selector)
    while True:
        while i < n and selector[i] in " \t\r\n":
            i += 1
        if i >= n:
            toks.append((_EOS, ""))
            return toks
        if selector[i] in _SPECIAL:
            j, best = i, None
            while j < n and selector[j] in _SPECIAL:
                if selector[i:j + 1] in _SYMBOLS:
                    best = j + 1
                elif best is not None:
                    break
                j += 1
            if best is None:
                raise bad_request(f"unable to parse requirement: error expected: keyword found '{selector[i:j]}'")
            toks.append((_SYMBOLS[selector[i:best]], selector[i:best]))
            i = best
        else:
            j = i
            while j < n and selector[j] not in _SPECIAL and selector[j] not in " \t\r\n":
                j += 1
            word = selector[i:j]
            toks.append((word if word in (_IN, _NOTIN) else _ID, word))
            i = j


class _LabelParser:
    def __init__(self, selector: str) -> None:
        self.toks = _lex(selector)
        self.pos = 0

    def look(self, values: bool = True) -> tuple[str, str]:
        tok, lit = self.toks[self.pos]
        return (_ID, lit) if values and tok in (_IN, _NOTIN) else (tok, lit)

    def take(self, values: bool = True) -> tuple[str, str]:
        out = self.look(values)
        self.pos = min(self.pos + 1, len(self.toks) - 1)
        return out

    def parse(self) -> list[Callable[[dict[str, str]], bool]]:
        reqs = []
        while True:
            tok, lit = self.look()
            if tok in (_ID, "!"):
                try:
                    reqs.append(self.requirement())
                except _ParseError as exc:
                    raise bad_request(f"unable to parse requirement: {exc}") from None
                tok, lit = self.take()
                if tok == _EOS:
                    return reqs
                if tok != ",":
                    raise bad_request(f"found '{lit}', expected: ',' or 'end of string'")
                tok2, lit2 = self.look()
                if tok2 not in (_ID, "!"):
                    raise bad_request(f"found '{lit2}', expected: identifier after ','")
            elif tok == _EOS:
                return reqs
            else:
                raise bad_request(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def requirement(self) -> Callable[[dict[str, str]], bool]:
        tok, key = self.take()
        negate = tok == "!"
        if negate:
            tok, key = self.take()
        if tok != _ID:
            raise _ParseError(f"found '{key}', expected: identifier")
        if negate:  # "!key" is complete; anything after it is the caller's problem
            return lambda labels: key not in labels
        if self.look()[0] in (_EOS, ","):
            return lambda labels: key in labels
        op, lit = self.take(values=False)
        if op in (_IN, _NOTIN):
            values = self.values()
            if op == _IN:
                return lambda labels: labels.get(key) in values
            return lambda labels: labels.get(key) not in values
        if op in ("=", "==", "!="):
            value = self.exact()
            if op == "!=":
                return lambda labels: labels.get(key) != value
            return lambda labels: labels.get(key) == value
        if op in (">", "<"):
            bound = self.exact()
            try:
                limit = int(bound)
            except ValueError:
                raise _ParseError(f"for 'Gt', 'Lt' operators, the value must be an integer: {bound}") from None
            if op == ">":
                return lambda labels: key in labels and labels[key].isdigit() and int(labels[key]) > limit
            return lambda labels: key in labels and labels[key].isdigit() and int(labels[key]) < limit
        raise _ParseError(f"found '{lit}', expected: in, notin, =, ==, !=, gt, lt")

    def values(self) -> frozenset[str]:
        tok, lit = self.take()
        if tok != "(":
            raise _ParseError(f"found '{lit}' expected: '('")
        tok, lit = self.look()
        if tok == ")":
            self.take()
            return frozenset({""})
        if tok not in (_ID, ","):
            raise _ParseError(f"found '{lit}', expected: ',', ')' or identifier")
        out: set[str] = set()
        while True:
            tok, lit = self.take()
            if tok == _ID:
                out.add(lit)
                tok2, lit2 = self.look()
                if tok2 == ",":
                    continue
                if tok2 == ")":
                    self.take()
                    return frozenset(out)
                raise _ParseError(f"found '{lit2}', expected: ',' or ')'")
            if tok == ",":
                if not out:
                    out.add("")
                tok2, _ = self.look()
                if tok2 == ")":
                    self.take()
                    out.add("")
                    return frozenset(out)
                if tok2 == ",":
                    self.take()
                    out.add("")
                continue
            raise _ParseError(f"found '{lit}', expected: ',', or identifier")

    def exact(self) -> str:
        tok, lit = self.look()
        if tok in (_EOS, ","):
            return ""
        tok, lit = self.take()
        if tok == _ID:
            return lit
        raise _ParseError(f"found '{lit}', expected: identifier")


class _ParseError(Exception):
    pass


def compile_label_selector(selector: str | None) -> Pred:
    if not selector or not selector.strip():
        return _TRUE
    reqs = _LabelParser(selector).parse()

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


# Resources with their own field label conversion answer "field label not supported" for other fields.
_CONVERTED = {("", "pods"), ("", "events"), ("", "secrets"), ("", "namespaces"), ("", "nodes"), ("", "services"),
              ("batch", "jobs")}


def _field_getter(plural: str, group: str, path: str, custom: bool) -> Callable[[dict[str, Any]], str]:
    # Upstream every resource supports metadata.name/namespace; a few add their own fields.
    extra = {
        ("", "pods"): {"status.phase", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                       "spec.serviceAccountName", "status.podIP", "status.nominatedNodeName"},
        ("", "events"): {"involvedObject.kind", "involvedObject.name", "involvedObject.namespace",
                         "involvedObject.uid", "reason", "type", "source"},
        ("", "secrets"): {"type"},
        ("", "namespaces"): {"status.phase"},
        ("batch", "jobs"): {"status.successful"},
        ("", "services"): {"spec.clusterIP", "spec.type"},
        ("", "nodes"): {"spec.unschedulable"},
    }
    if path not in ("metadata.name", "metadata.namespace") and path not in extra.get((group, plural), ()):
        if custom or (group, plural) in _CONVERTED:
            raise bad_request(f"field label not supported: {path}")
        raise bad_request(f'"{path}" is not a known field selector: only "metadata.name", "metadata.namespace"')
    keys = path.split(".")

    def get(obj: dict[str, Any]) -> str:
        cur: Any = obj
        for k in keys:
            cur = cur.get(k) if isinstance(cur, dict) else None
        return "" if cur is None else str(cur)

    return get


def compile_field_selector(selector: str | None, *, plural: str, group: str, custom: bool = False) -> Pred:
    if not selector or not selector.strip():
        return _TRUE
    reqs: list[Pred] = []
    for raw in selector.split(","):
        m = re.match(r"^\s*([^!=\s]+)\s*(==|=|!=)\s*(.*?)\s*$", raw)
        if not m:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{raw}'")
        getter, op, value = _field_getter(plural, group, m.group(1), custom), m.group(2), m.group(3)
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
