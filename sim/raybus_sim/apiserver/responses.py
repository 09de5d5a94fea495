"""JSON responses, Status errors and the per-request Warning headers (upstream's `299 - "text"`)."""

from __future__ import annotations

import json
from contextvars import ContextVar
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from .errors import ApiError
from .gofmt import quote

JSON = "application/json"
_DUMPS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
# Warnings the current request produced (unknown fields, pod name/port warnings, ...).
WARNINGS: ContextVar[list[str] | None] = ContextVar("raybus_sim_warnings", default=None)


def warnings() -> list[str] | None:
    return WARNINGS.get()


def respond(body: Any, status: int = 200) -> web.Response:
    headers: CIMultiDict[str] = CIMultiDict()
    for text in WARNINGS.get() or ():
        headers.add("Warning", f"299 - {quote(text)}")
    return web.Response(body=_DUMPS(body).encode(), status=status, content_type=JSON, headers=headers)


def error_response(err: ApiError) -> web.Response:
    return web.Response(body=_DUMPS(err.status()).encode(), status=err.code, content_type=JSON)
