"""Just enough of `bash -ce` to run the scripts KubeRay puts into submitter containers.

KubeRay's submitter scripts (common/job.go BuildJobSubmitCommand) are one line of simple
commands joined with `;`, `if ! ...; then ...; fi`, `until ... | grep ...; do ...; done`,
redirections to /dev/null and `$VAR` references to the container's env. This module parses that
subset into a tree and runs it, asking a callback to run each simple command (the simulator
decides what `ray job submit`, `wget`, `sleep` do). `-e` holds as in bash: a failing command ends
the script, except in a condition, after `!`, or left of `&&`/`||`.

Known simplifications: a quoted `;`, `|` or `&` is taken as an operator; no subshells, globbing,
functions or here-documents.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Union

RunSimple = Callable[[list[str]], Awaitable[int]]

_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_REDIRECT = re.compile(r"^\d*(?:>>?|<)(?:&\d+)?(\S*)$")
_RESERVED = frozenset({"then", "fi", "do", "done", "else", "elif"})


class ShellError(Exception):
    """The script is outside the supported subset (or not valid shell)."""


class Exit(Exception):  # the shell's `exit`, not an error
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


@dataclass
class Simple:
    words: list[str]


@dataclass
class Pipeline:
    commands: list[Node]
    negate: bool = False


@dataclass
class AndOr:
    first: Pipeline
    rest: list[tuple[str, Pipeline]] = field(default_factory=list)  # ("&&" | "||", pipeline)


@dataclass
class If:
    branches: list[tuple[list[AndOr], list[AndOr]]]  # (condition, body) for if/elif
    orelse: list[AndOr] | None = None


@dataclass
class Loop:
    until: bool
    condition: list[AndOr]
    body: list[AndOr]


Node = Union[Simple, If, Loop]  # noqa: UP007 - a runtime alias used in dataclass fields


def expand(script: str, env: Mapping[str, str]) -> str:
    """`$VAR` / `${VAR}` from the container's env (unset: empty, as in bash)."""
    return _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), ""), script)


def tokenize(script: str) -> list[str]:
    lex = shlex.shlex(script, posix=True, punctuation_chars=";&|")
    lex.whitespace_split = True
    try:
        raw = list(lex)
    except ValueError as exc:  # unbalanced quotes
        raise ShellError(str(exc)) from exc
    out: list[str] = []
    i = 0
    while i < len(raw):
        tok = raw[i]
        match = _REDIRECT.match(tok)
        if match is not None and tok[0] in "0123456789><":
            # `>/dev/null`, `2>&1` (tokenized as `2>`, `&`, `1`), `> file`: output goes nowhere here.
            if tok.endswith(">") and i + 2 < len(raw) and raw[i + 1] == "&" and raw[i + 2].isdigit():
                i += 3
            elif not match.group(1) and tok.endswith((">", "<")):
                i += 2
            else:
                i += 1
            continue
        out.append(tok)
        i += 1
    return out


class _Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.toks = tokens
        self.pos = 0

    def peek(self) -> str | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            raise ShellError(f"expected {expected!r}, found {tok!r}")
        self.pos += 1
        return tok

    def skip_separators(self) -> None:
        while self.peek() in (";", "\n"):
            self.pos += 1

    def sequence(self, stop: frozenset[str]) -> list[AndOr]:
        out: list[AndOr] = []
        self.skip_separators()
        while self.peek() is not None and self.peek() not in stop:
            out.append(self.and_or())
            self.skip_separators()
        return out

    def and_or(self) -> AndOr:
        node = AndOr(self.pipeline())
        while self.peek() in ("&&", "||"):
            op = self.take()
            node.rest.append((op, self.pipeline()))
        return node

    def pipeline(self) -> Pipeline:
        negate = False
        if self.peek() == "!":
            self.take()
            negate = True
        commands = [self.command()]
        while self.peek() == "|":
            self.take()
            commands.append(self.command())
        return Pipeline(commands, negate)

    def command(self) -> Node:
        tok = self.peek()
        if tok == "if":
            return self.if_()
        if tok in ("until", "while"):
            self.take()
            cond = self.sequence(frozenset({"do"}))
            self.take("do")
            body = self.sequence(frozenset({"done"}))
            self.take("done")
            return Loop(tok == "until", cond, body)
        words: list[str] = []
        while self.peek() is not None and self.peek() not in (";", "&&", "||", "|", "&", "\n"):
            if not words and self.peek() in _RESERVED:
                break
            words.append(self.take())
        if not words:
            raise ShellError(f"unexpected {self.peek()!r}")
        return Simple(words)

    def if_(self) -> If:
        self.take("if")
        branches: list[tuple[list[AndOr], list[AndOr]]] = []
        cond = self.sequence(frozenset({"then"}))
        self.take("then")
        branches.append((cond, self.sequence(frozenset({"elif", "else", "fi"}))))
        orelse = None
        while self.peek() == "elif":
            self.take()
            cond = self.sequence(frozenset({"then"}))
            self.take("then")
            branches.append((cond, self.sequence(frozenset({"elif", "else", "fi"}))))
        if self.peek() == "else":
            self.take()
            orelse = self.sequence(frozenset({"fi"}))
        self.take("fi")
        return If(branches, orelse)


def parse(script: str, env: Mapping[str, str] | None = None) -> list[AndOr]:
    parser = _Parser(tokenize(expand(script, env or {})))
    tree = parser.sequence(frozenset())
    if parser.peek() is not None:
        raise ShellError(f"unexpected {parser.peek()!r}")
    return tree


class Runner:
    """Runs a parsed script; `run_simple` runs one simple command and returns its exit code."""

    def __init__(self, run_simple: RunSimple) -> None:
        self._run_simple = run_simple

    async def run(self, tree: list[AndOr]) -> int:
        try:
            return await self._sequence(tree, errexit=True)
        except Exit as done:
            return done.code

    async def _sequence(self, seq: list[AndOr], *, errexit: bool) -> int:
        code = 0
        for item in seq:
            code = await self._and_or(item, errexit=errexit)
        return code

    async def _and_or(self, node: AndOr, *, errexit: bool) -> int:
        code = await self._pipeline(node.first, errexit=errexit and not node.rest)
        for index, (op, pipe) in enumerate(node.rest):
            if (op == "&&") == (code == 0):
                last = index == len(node.rest) - 1
                code = await self._pipeline(pipe, errexit=errexit and last)
        return code

    async def _pipeline(self, pipe: Pipeline, *, errexit: bool) -> int:
        # The commands of a pipeline feed each other (`wget ... | grep success`): all must succeed.
        code = 0
        for command in pipe.commands:
            code = await self._command(command, errexit=False) or code
        if pipe.negate:
            return 0 if code else 1
        if code and errexit:
            raise Exit(code)
        return code

    async def _command(self, node: Node, *, errexit: bool) -> int:
        if isinstance(node, Simple):
            if node.words[0] == "exit":
                raise Exit(int(node.words[1]) if len(node.words) > 1 and node.words[1].isdigit() else 0)
            return await self._run_simple(node.words)
        if isinstance(node, If):
            for cond, body in node.branches:
                if await self._sequence(cond, errexit=False) == 0:
                    return await self._sequence(body, errexit=True)
            return await self._sequence(node.orelse, errexit=True) if node.orelse is not None else 0
        while (await self._sequence(node.condition, errexit=False) == 0) != node.until:
            await self._sequence(node.body, errexit=True)
        return 0
