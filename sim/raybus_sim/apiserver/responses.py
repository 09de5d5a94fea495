"""JSON responses, Status errors and the per-request Warning headers (upstream's `299 - "text"`)."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from aiohttp import web
from multidict import CIMultiDict
from pydantic_core import to_json

from .errors import ApiError
from .gofmt import quote

JSON = "application/json"
# Compact UTF-8 JSON in key order, as the real server's encoding/json writes it: pydantic-core's
# encoder is about twice as fast as json's C encoder on a Pod (issue 20: encoding answers and
# watch events was a sixth of the simulator's CPU, on the same two cores as raybus).
_DUMPS = to_json
# Warnings the current request produced (unknown fields, pod name/port warnings, ...).
WARNINGS: ContextVar[list[str] | None] = ContextVar("raybus_sim_warnings", default=None)


def warnings() -> list[str] | None:
    return WARNINGS.get()


def respond(body: Any, status: int = 200) -> web.Response:
    headers: CIMultiDict[str] = CIMultiDict()
    for text in WARNINGS.get() or ():
        headers.add("Warning", f"299 - {quote(text)}")
    return web.Response(body=_DUMPS(body), status=status, content_type=JSON, headers=headers)


def error_response(err: ApiError) -> web.Response:
    return web.Response(body=_DUMPS(err.status()), status=err.code, content_type=JSON)
