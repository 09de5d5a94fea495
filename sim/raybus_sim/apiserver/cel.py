"""A small CEL subset for CRD `x-kubernetes-validations` rules.

Covers what KubeRay's CRDs use (has(), &&, ||, !, ==, !=, in, list/string/number/bool literals,
self/oldSelf field selection) plus size() and comparisons. A rule outside the subset raises
Unsupported when compiled; the schema layer then skips it (listed in the README).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

_TOKEN = re.compile(r"""\s*(?:(?P<num>\d+(?:\.\d+)?)|(?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|"""
                    r"""(?P<op>\|\||&&|==|!=|<=|>=|[!<>()\[\],.+-])|(?P<id>[A-Za-z_][A-Za-z0-9_]*))""")
Node = tuple[Any, ...]
Env = dict[str, Any]


class Unsupported(ValueError):
    """The rule uses CEL this evaluator does not implement."""


class EvalError(Exception):
    """CEL evaluation failed (e.g. selecting a field that is not set)."""


class _Missing:
    pass


MISSING = _Missing()


def _lex(rule: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    rule = rule.strip()
    while pos < len(rule):
        m = _TOKEN.match(rule, pos)
        if not m or m.end() == pos:
            raise Unsupported(f"cannot tokenize {rule[pos:]!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, rule: str) -> None:
        self.toks = _lex(rule)
        self.i = 0

    def peek(self) -> str | None:
        return self.toks[self.i][1] if self.i < len(self.toks) else None

    def take(self, want: str | None = None) -> tuple[str, str]:
        if self.i >= len(self.toks) or (want is not None and self.toks[self.i][1] != want):
            raise Unsupported(f"expected {want!r}")
        self.i += 1
        return self.toks[self.i - 1]

    def parse(self) -> Node:
        node = self.binary(0)
        if self.i != len(self.toks):
            raise Unsupported(f"unexpected {self.peek()!r}")
        return node

    _LEVELS: tuple[tuple[str, ...], ...] = (("||",), ("&&",), ("==", "!=", "<", "<=", ">", ">=", "in"))

    def binary(self, level: int) -> Node:
        if level == len(self._LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek() in self._LEVELS[level]:
            op = self.take()[1]
            left = ("bin", op, left, self.binary(level + 1))
            if level == 2:
                break  # relations do not chain
        return left

    def unary(self) -> Node:
        if self.peek() in ("!", "-"):
            return ("un", self.take()[1], self.unary())
        return self.member()

    def member(self) -> Node:
        node = self.primary()
        while self.peek() in (".", "["):
            if self.take()[1] == ".":
                name = self.take()[1]
                if self.peek() == "(":
                    node = ("call", name, [node, *self.args()])
                else:
                    node = ("sel", node, name)
            else:
                node = ("idx", node, self.binary(0))
                self.take("]")
        return node

    def args(self) -> list[Node]:
        self.take("(")
        out: list[Node] = []
        while self.peek() != ")":
            out.append(self.binary(0))
            if self.peek() == ",":
                self.take(",")
        self.take(")")
        return out

    def primary(self) -> Node:
        kind, text = self.take()
        if kind == "num":
            return ("lit", float(text) if "." in text else int(text))
        if kind == "str":
            return ("lit", bytes(text[1:-1], "utf-8").decode("unicode_escape"))
        if text == "(":
            node = self.binary(0)
            self.take(")")
            return node
        if text == "[":
            items: list[Node] = []
            while self.peek() != "]":
                items.append(self.binary(0))
                if self.peek() == ",":
                    self.take(",")
            self.take("]")
            return ("list", items)
        if kind == "id":
            if text in ("true", "false", "null"):
                return ("lit", {"true": True, "false": False, "null": None}[text])
            if self.peek() == "(":
                return ("call", text, self.args())
            return ("var", text)
        raise Unsupported(f"unexpected {text!r}")


def _select(value: Any, name: str) -> Any:
    if isinstance(value, dict) and name in value:
        return value[name]
    raise EvalError(f"no such key: {name}")


_RELATIONS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_METHODS: dict[str, Callable[..., Any]] = {
    "size": len, "startsWith": lambda s, p: s.startswith(p), "endsWith": lambda s, p: s.endswith(p),
    "contains": lambda s, p: p in s, "matches": lambda s, p: re.search(p, s) is not None,
}


def _eval(node: Node, env: Env) -> Any:
    tag = node[0]
    if tag == "lit":
        return node[1]
    if tag == "var":
        if node[1] not in env:
            raise Unsupported(f"unknown variable {node[1]}")
        return env[node[1]]
    if tag == "list":
        return [_eval(n, env) for n in node[1]]
    if tag == "sel":
        return _select(_eval(node[1], env), node[2])
    if tag == "idx":
        return _eval(node[1], env)[_eval(node[2], env)]
    if tag == "un":
        value = _eval(node[2], env)
        return (not value) if node[1] == "!" else -value
    if tag == "call":
        name, args = node[1], node[2]
        if name == "has":
            if len(args) != 1 or args[0][0] != "sel":
                raise Unsupported("has() needs a field selection")
            try:
                parent = _eval(args[0][1], env)
            except EvalError:
                return False
            return isinstance(parent, dict) and args[0][2] in parent
        if name in _METHODS:
            return _METHODS[name](*(_eval(a, env) for a in args))
        raise Unsupported(f"function {name}")
    op, left = node[1], node[2]
    if op == "||":
        return bool(_eval(left, env)) or bool(_eval(node[3], env))
    if op == "&&":
        return bool(_eval(left, env)) and bool(_eval(node[3], env))
    a, b = _eval(left, env), _eval(node[3], env)
    if op == "in":
        return a in b
    return _RELATIONS[op](a, b)


@lru_cache(maxsize=256)
def compile_rule(rule: str) -> Node:
    """Parse once; raises Unsupported for CEL beyond the subset."""
    node = _Parser(rule).parse()
    _check_vars(node)
    return node


def _check_vars(node: Any) -> None:
    if isinstance(node, tuple) and node and node[0] == "var" and node[1] not in ("self", "oldSelf"):
        raise Unsupported(f"unknown variable {node[1]}")
    for child in node[1:] if isinstance(node, tuple) else node if isinstance(node, list) else ():
        if isinstance(child, (tuple, list)):
            _check_vars(child)


def uses_old_self(rule: str) -> bool:
    return re.search(r"\boldSelf\b", rule) is not None


def evaluate(rule: str, value: Any, old: Any = MISSING) -> bool:
    """True when the rule holds; an evaluation error counts as a failed rule."""
    env: Env = {"self": value}
    if old is not MISSING:
        env["oldSelf"] = old
    try:
        return bool(_eval(compile_rule(rule), env))
    except (EvalError, TypeError, KeyError, IndexError):
        return False
