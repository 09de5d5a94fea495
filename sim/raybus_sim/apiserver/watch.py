"""Streaming watch: newline-delimited JSON WatchEvents, bookmarks, timeouts, 410 as an ERROR event."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from typing import Any

from aiohttp import web
from pydantic_core import to_json

from .errors import ApiError
from .events import from_storage, is_converted
from .keys import STATE
from .params import int_param
from .resources import ResourceType
from .selectors import compile_field_selector, compile_label_selector
from .store import Obj, Store
from .table import partial_metadata, to_table, wants_metadata

_DUMPS = to_json  # responses._DUMPS: compact, key order kept, twice json's speed
# Encoded-object cache shared by all watchers: with N watchers on one resource each event is encoded once.
# Entries keep the object alive so id() cannot be reused while cached.
_CACHE: OrderedDict[int, tuple[Obj, bytes]] = OrderedDict()
_CACHE_MAX = 4096


def _encode(obj: Obj) -> bytes:
    hit = _CACHE.get(id(obj))
    if hit is not None and hit[0] is obj:
        return hit[1]
    text = _DUMPS(obj)
    _CACHE[id(obj)] = (obj, text)
    if len(_CACHE) > _CACHE_MAX:
        _CACHE.popitem(last=False)
    return text


def _line(etype: str, obj_json: bytes) -> bytes:
    return b'{"type":"' + etype.encode() + b'","object":' + obj_json + b'}\n'


async def serve_watch(request: web.Request, store: Store, rt: ResourceType, ns: str | None,
                      name: str | None) -> web.StreamResponse:
    q = request.query
    pred_l = compile_label_selector(q.get("labelSelector"))
    fsel = q.get("fieldSelector")
    if name is not None:  # GET /.../pods/NAME?watch=1 (legacy single-object watch)
        fsel = f"metadata.name={name}" + (f",{fsel}" if fsel else "")
    pred_f = compile_field_selector(fsel, plural=rt.plural, group=rt.group, custom=rt.custom)
    table = "as=Table" in request.headers.get("Accept", "")
    metadata_only = wants_metadata(request.headers.get("Accept", ""), collection=False)
    bookmarks = q.get("allowWatchBookmarks") in ("1", "true", "True")
    send_initial = q.get("sendInitialEvents") in ("1", "true", "True")
    timeout = float(int_param(q, "timeoutSeconds") or request.app[STATE].watch_timeout)
    bookmark_every: float = request.app[STATE].bookmark_interval

    resp = web.StreamResponse(headers={"Content-Type": "application/json", "Cache-Control": "no-cache"})
    resp.enable_chunked_encoding()
    # Registered before the response starts: every change after the client sees 200 reaches it.
    try:
        watcher, backlog = store.watch(rt, ns, q.get("resourceVersion"), lambda o: pred_l(o) and pred_f(o),
                                       send_initial=send_initial)
    except ApiError as err:  # upstream answers 200 and sends the error (410 Expired) as an ERROR event
        await resp.prepare(request)
        await resp.write(_line("ERROR", _DUMPS(err.status())))
        return resp
    try:
        await resp.prepare(request)
    except BaseException:
        store.unwatch(rt, watcher)
        raise

    first_table = True
    converted = is_converted(rt)

    def render(etype: str, obj: Obj) -> bytes:
        nonlocal first_table
        if table:
            t = to_table(rt, [from_storage(rt, obj) if converted else obj], obj["metadata"]["resourceVersion"],
                         with_defs=first_table)
            first_table = False
            return _line(etype, _DUMPS(t))
        if metadata_only:
            return _line(etype, _DUMPS(partial_metadata(obj)))
        if converted:
            return _line(etype, _DUMPS(from_storage(rt, obj)))
        return _line(etype, _encode(obj))

    def bookmark(extra: dict[str, Any] | None = None) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(store.rv)}
        if extra:
            meta["annotations"] = extra
        kind = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1"} if metadata_only else \
            {"kind": rt.kind, "apiVersion": rt.api_version}
        return _line("BOOKMARK", _DUMPS({**kind, "metadata": meta}))

    try:
        chunk = b"".join(render(t, o) for t, o in backlog)
        if send_initial and bookmarks:
            chunk += bookmark({"k8s.io/initial-events-end": "true"})
        if chunk:
            await resp.write(chunk)
        deadline = time.monotonic() + timeout
        next_bookmark = time.monotonic() + bookmark_every
        queue = watcher.queue
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            wait = deadline - now
            if bookmarks:
                wait = min(wait, max(0.0, next_bookmark - now))
            try:
                etype, obj = await asyncio.wait_for(queue.get(), timeout=wait)
            except TimeoutError:
                if bookmarks and time.monotonic() >= next_bookmark:
                    await resp.write(bookmark())
                    next_bookmark = time.monotonic() + bookmark_every
                continue
            parts = []
            while True:  # batch whatever queued up into one write
                if etype == "CLOSE":
                    break
                parts.append(render(etype, obj))
                if queue.empty():
                    break
                etype, obj = queue.get_nowait()
            if parts:
                await resp.write(b"".join(parts))
            if etype == "CLOSE":
                break
    except ConnectionResetError:
        pass
    finally:
        store.unwatch(rt, watcher)
    return resp
