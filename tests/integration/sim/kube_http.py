"""A small HTTP client for the real-answer table, the answer shapes of ../shared/kube-apiserver/README.md
and the matcher that compares an answer with the real one.

Every runner (kube_runs_*.py) sends its request(s) to a fresh local API server over HTTP and returns an
answer dict shaped like the README's: `code`, `msg`, `reason`, `causes`, `warnings`, plus `_obj` (the
response body), from which the matcher reads the README's dotted keys (`spec.containers.0.protocol`).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

NS = "apidiff"  # the namespace of the real run; it appears in the real messages
ADMIN = "raybus-sim"  # write_kubeconfig's token: full access, like the real run's cluster-admin
Json = dict[str, Any]
Answer = dict[str, Any]
Runner = Callable[["Api"], Awaitable[Answer]]
RUNNERS: dict[tuple[str, str], Runner] = {}
# Rows whose answer the local server still does not give, with why (also listed in the sim README).
DIFFERS: dict[tuple[str, str], str] = {}
# Parts of a real answer no server can reproduce (the real run's own resourceVersions), replaced by
# placeholders: (section, title) -> {key: expectation}.
RELAXED: dict[tuple[str, str], dict[str, Any]] = {}

_CORE = {"pods", "services", "configmaps", "events", "serviceaccounts", "secrets", "namespaces"}
_GROUPS = {"deployments": "apps/v1", "roles": "rbac.authorization.k8s.io/v1",
           "rolebindings": "rbac.authorization.k8s.io/v1", "rayclusters": "ray.io/v1", "rayjobs": "ray.io/v1",
           "newevents": "events.k8s.io/v1"}


def case(section: str, title: str, *, differs: str | None = None,
         relaxed: dict[str, Any] | None = None) -> Callable[[Runner], Runner]:
    def register(fn: Runner) -> Runner:
        assert (section, title) not in RUNNERS, (section, title)
        RUNNERS[(section, title)] = fn
        if differs:
            DIFFERS[(section, title)] = differs
        if relaxed:
            RELAXED[(section, title)] = relaxed
        return fn
    return register


def expectation(real: dict[str, Any], key: tuple[str, str]) -> dict[str, Any]:
    return {**real, **RELAXED.get(key, {})}


def path(resource: str, name: str | None = None, sub: str | None = None, *, ns: str | None = NS) -> str:
    plural = "events" if resource == "newevents" else resource
    base = "/api/v1" if resource in _CORE else f"/apis/{_GROUPS[resource]}"
    if ns is not None and resource != "namespaces":
        base += f"/namespaces/{ns}"
    out = f"{base}/{plural}"
    if name is not None:
        out += f"/{name}"
    if sub is not None:
        out += f"/{sub}"
    return out


@dataclass
class Resp:
    code: int
    body: Any
    text: str
    warnings: list[str] = field(default_factory=list)

    def answer(self, **extra: Any) -> Answer:
        body = self.body if isinstance(self.body, dict) else {}
        status = body.get("kind") == "Status"
        causes = ((body.get("details") or {}).get("causes") or []) if status else []
        # An object answer has no message; `reason` is then the object's own field (Events have one).
        out: Answer = {"code": self.code, "msg": body.get("message", "") if status else "",
                       "reason": body.get("reason"),
                       "causes": [[c.get("field"), c.get("reason"), c.get("message")] for c in causes],
                       "warnings": self.warnings, "_obj": body}
        out.update(extra)
        return out


class Api:
    def __init__(self, http: aiohttp.ClientSession, url: str, *, token: str | None = ADMIN,
                 kubeconfig: Path | None = None) -> None:
        self.http, self.url, self.token, self.kubeconfig = http, url, token, kubeconfig

    def as_token(self, token: str | None) -> Api:
        return Api(self.http, self.url, token=token, kubeconfig=self.kubeconfig)

    async def req(self, method: str, url_path: str, body: Any = None, *, ctype: str = "application/json",
                  query: dict[str, str] | None = None, raw: bytes | None = None) -> Resp:
        headers = {"Content-Type": ctype, "Accept": "application/json"}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        async with self.http.request(method, self.url + url_path, data=data, params=query or {},
                                     headers=headers) as r:
            text = await r.text()
            try:
                parsed: Any = json.loads(text) if text else None
            except ValueError:
                parsed = text
            return Resp(r.status, parsed, text, list(r.headers.getall("Warning", [])))

    async def create(self, resource: str, obj: Json, *, query: dict[str, str] | None = None,
                     ns: str | None = NS) -> Resp:
        return await self.req("POST", path(resource, ns=ns), obj, query=query)

    async def ok(self, resource: str, obj: Json, *, ns: str | None = NS) -> Json:
        """Create something the case needs; it must succeed."""
        r = await self.create(resource, obj, ns=ns)
        assert r.code == 201, (r.code, r.text)
        return r.body  # type: ignore[no-any-return]

    async def get(self, resource: str, name: str, *, query: dict[str, str] | None = None) -> Resp:
        return await self.req("GET", path(resource, name), query=query)

    async def put(self, resource: str, name: str, obj: Json, *, sub: str | None = None) -> Resp:
        return await self.req("PUT", path(resource, name, sub), obj)

    async def patch(self, resource: str, name: str, body: Any, *, kind: str = "merge",
                    sub: str | None = None, query: dict[str, str] | None = None) -> Resp:
        ctype = {"merge": "application/merge-patch+json", "json": "application/json-patch+json",
                 "strategic": "application/strategic-merge-patch+json",
                 "apply": "application/apply-patch+yaml"}[kind]
        return await self.req("PATCH", path(resource, name, sub), body, ctype=ctype, query=query)

    async def delete(self, resource: str, name: str, options: Json | None = None) -> Resp:
        return await self.req("DELETE", path(resource, name), options)

    async def list_names(self, resource: str, query: dict[str, str] | None = None) -> Answer:
        r = await self.req("GET", path(resource), query=query)
        if r.code != 200:
            return r.answer()
        return {"code": 200, "names": [i["metadata"]["name"] for i in r.body["items"]], "_obj": r.body}

    async def watch(self, resource: str, query: dict[str, str], *, expect_initial: int = 0,
                    during: Callable[[], Awaitable[None]] | None = None) -> Answer:
        """One watch request: events as [type, name] ([ERROR, code, reason, message]) and info (code,
        duration in whole seconds; the body's start for a refused watch). `during` runs once the first
        `expect_initial` events arrived."""
        headers = {"Accept": "application/json"}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        start = time.monotonic()
        events: list[list[Any]] = []
        async with self.http.get(self.url + path(resource), params={"watch": "1", **query},
                                 headers=headers) as r:
            if r.status != 200:
                return {"events": [], "info": {"code": r.status, "body": await r.text()}}
            task = None
            async for line in r.content:
                if not line.strip():
                    continue
                ev = json.loads(line)
                obj = ev["object"]
                if ev["type"] == "ERROR":
                    events.append(["ERROR", obj.get("code"), obj.get("reason"), obj.get("message")])
                else:
                    events.append([ev["type"], obj["metadata"].get("name")])
                if during is not None and task is None and len(events) >= expect_initial:
                    task = asyncio.ensure_future(during())
            if during is not None and task is None:
                task = asyncio.ensure_future(during())
            if task is not None:
                await task
            return {"events": events, "info": {"code": r.status, "dur": round(time.monotonic() - start)}}


async def start_watch_then(api: Api, resource: str, query: dict[str, str], action: Callable[[], Awaitable[None]],
                           *, expect_initial: int = 0) -> Answer:
    """A watch whose `action` runs after its initial events (or at once when none are expected)."""
    if expect_initial:
        return await api.watch(resource, query, expect_initial=expect_initial, during=action)

    async def delayed() -> None:
        await asyncio.sleep(0.3)  # the watch is registered before its response headers are sent
        await action()
    watch = asyncio.ensure_future(api.watch(resource, query))
    await delayed()
    return await watch


# --- matching ---------------------------------------------------------------------------------------
ABSENT = object()
_PLACEHOLDER = re.compile(r"<(uid|ts|ip|rv|age)>")
_POINTER = re.compile(r"0x[0-9a-f]{6,}")


def _lookup(actual: Any, key: str) -> Any:
    if isinstance(actual, dict) and key in actual:
        return actual[key]
    obj: Any = actual.get("_obj") if isinstance(actual, dict) else None
    for part in key.split("."):
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        elif isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        else:
            return ABSENT
    return obj


def _text_matches(expected: str, actual: str, *, first_line: bool, prefix: bool) -> bool:
    if first_line and "\n" not in expected:
        actual = actual.split("\n", 1)[0]
    expected, actual = _POINTER.sub("0xPTR", expected), _POINTER.sub("0xPTR", actual)
    truncated = expected.endswith("...")
    if truncated:
        expected = expected[:-3]
    pattern = "".join(".+?" if i % 2 else re.escape(part)
                      for i, part in enumerate(_PLACEHOLDER.split(expected)))
    return re.match(pattern + ("" if truncated or prefix else r"\Z"), actual, re.DOTALL) is not None


def mismatches(expected: Any, actual: Any, where: str = "") -> list[str]:
    """Differences between the real answer and the local one ([] = they match)."""
    if isinstance(expected, dict):
        out: list[str] = []
        for key, want in expected.items():
            got = _lookup(actual, key)
            if key == "causes" and isinstance(want, list) and isinstance(got, list):
                # the README keeps (field, reason) of each cause, sometimes also its message
                got = [c[:len(w)] if isinstance(c, list) and isinstance(w, list) else c
                       for c, w in zip(got, want, strict=False)] + got[len(want):]
            out += mismatches(want, got, f"{where}.{key}" if where else key) if not (
                isinstance(want, str) and key in ("msg", "body")) else (
                [] if isinstance(got, str) and _text_matches(want, got, first_line=key == "msg",
                                                               prefix=key == "body")
                else [f"{where}.{key}: real {want!r}, local {got!r}"])
        return out
    if expected == "<absent>":
        return [] if actual is ABSENT or actual == "<absent>" else [f"{where}: real <absent>, local {actual!r}"]
    if actual is ABSENT:
        return [f"{where}: real {expected!r}, local <absent>"]
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{where}: real {expected!r}, local {actual!r}"]
        out = []
        for i, (want, got) in enumerate(zip(expected, actual, strict=True)):
            out += mismatches(want, got, f"{where}[{i}]")
        return out
    if isinstance(expected, str) and (_PLACEHOLDER.search(expected) or expected.endswith("...")):
        ok = isinstance(actual, str) and bool(actual) and _text_matches(expected, actual, first_line=False,
                                                                         prefix=False)
        return [] if ok else [f"{where}: real {expected!r}, local {actual!r}"]
    if isinstance(expected, str) and isinstance(actual, str) and "\n" in actual and "\n" not in expected:
        ok = _text_matches(expected, actual, first_line=True, prefix=False)
        return [] if ok else [f"{where}: real {expected!r}, local {actual!r}"]
    return [] if expected == actual and type(expected) is type(actual) or (
        isinstance(expected, (int, float)) and not isinstance(expected, bool) and expected == actual
        and not isinstance(actual, bool)) else [f"{where}: real {expected!r}, local {actual!r}"]
