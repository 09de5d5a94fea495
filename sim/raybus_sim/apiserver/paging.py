"""limit/continue paging over a consistent snapshot, like etcd-backed lists.

The first page of a paged list keeps a reference snapshot of the (immutable) objects; continue
tokens name it, so later pages show the list as of the first page's resourceVersion even if objects
change meanwhile. Snapshots expire (TTL/LRU); an expired token gets 410 Expired as upstream after
compaction.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from . import errors

Obj = dict[str, Any]
_EXPIRED = ("The provided continue parameter is too old to display a consistent list result. You can start a new "
            "list without the continue parameter.")


def _key(o: Obj) -> tuple[str, str]:
    return (o["metadata"].get("namespace", ""), o["metadata"]["name"])


class ListSnapshots:
    def __init__(self, *, ttl: float = 300.0, max_entries: int = 64) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._snaps: OrderedDict[str, tuple[float, str, list[Obj]]] = OrderedDict()

    def put(self, rv: str, items: list[Obj]) -> str:
        sid = uuid.uuid4().hex[:16]
        self._snaps[sid] = (time.monotonic(), rv, items)
        while len(self._snaps) > self.max_entries:
            self._snaps.popitem(last=False)
        return sid

    def get(self, sid: str) -> tuple[str, list[Obj]] | None:
        hit = self._snaps.get(sid)
        if hit is None or time.monotonic() - hit[0] > self.ttl:
            self._snaps.pop(sid, None)
            return None
        self._snaps.move_to_end(sid)
        return hit[1], hit[2]


def _go_json_error(data: bytes) -> str:
    """encoding/json's message for a document that does not start like JSON."""
    text = data.lstrip(b" \t\r\n")
    if not text:
        return "unexpected end of JSON input"
    ch = text[:1]
    shown = ch.decode() if 0x20 <= ch[0] < 0x7f else f"\\x{ch[0]:02x}"
    return f"invalid character '{shown}' looking for beginning of value"


def _decode_continue(cont: str) -> tuple[tuple[str, str], str]:
    """(last key, snapshot id) from a continue token, or upstream's 400s."""
    try:
        raw = base64.urlsafe_b64decode(cont + "=" * (-len(cont) % 4))
    except (ValueError, TypeError):
        raise errors.bad_request("invalid continue token: continue key is not valid: illegal base64 data at input "
                                 "byte 0") from None
    try:
        tok = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise errors.bad_request(f"invalid continue token: continue key is not valid: {_go_json_error(raw)}") from None
    try:
        if tok.get("v") != "meta.k8s.io/v1":
            raise KeyError("v")
        ns, _, name = str(tok["start"]).partition("\x00")
        return (ns, name), str(tok["s"])
    except (KeyError, TypeError, AttributeError):
        raise errors.bad_request("invalid continue token: continue key is not valid: incorrect encoded start "
                                 "resourceVersion (version meta.k8s.io/v1)") from None


def paginate(q: Any, *, limit: int, snapshots: ListSnapshots, current_rv: str, load: Callable[[], list[Obj]],
             pred: Callable[[Obj], bool], selected: bool) -> tuple[list[Obj], Obj]:
    """Returns (page items, list metadata). The snapshot holds every object; each page applies the
    request's own selectors (a continue token with other selectors filters the same snapshot, as etcd
    pages do). remainingItemCount is only known (and sent) without selectors."""
    cont = q.get("continue")
    if cont:
        last, sid = _decode_continue(cont)
        snap = snapshots.get(sid)
        if snap is None:
            raise errors.gone(_EXPIRED)
        rv, everything = snap
        candidates = [o for o in everything if _key(o) > last]
    else:
        rv, everything = current_rv, sorted(load(), key=_key)  # upstream pages in key (namespace/name) order
        candidates, sid = everything, ""
    items = [o for o in candidates if pred(o)]
    meta: Obj = {"resourceVersion": rv}
    if 0 < limit < len(items):
        if not sid:
            sid = snapshots.put(rv, everything)
        last_key = _key(items[limit - 1])
        meta["continue"] = base64.urlsafe_b64encode(json.dumps(
            {"v": "meta.k8s.io/v1", "rv": int(rv), "start": f"{last_key[0]}\x00{last_key[1]}", "s": sid}).encode()
        ).decode().rstrip("=")
        if not selected:
            meta["remainingItemCount"] = len(items) - limit
        items = items[:limit]
    return items, meta
