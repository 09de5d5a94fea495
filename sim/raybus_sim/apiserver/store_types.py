"""The store's records: committed events, watchers and per-resource state."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .resources import ResourceType

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace or "", name)


@dataclass(slots=True)
class Event:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    obj: Obj
    old: Obj | None
    rt: ResourceType


@dataclass(eq=False)
class Watcher:
    namespace: str | None
    pred: Callable[[Obj], bool]
    queue: asyncio.Queue[tuple[str, Obj]] = field(default_factory=asyncio.Queue)

    def push(self, ev: Event) -> None:
        obj = ev.obj
        if self.namespace is not None and obj["metadata"].get("namespace") != self.namespace:
            return
        now = self.pred(obj)
        if ev.type == "MODIFIED":
            before = ev.old is not None and self.pred(ev.old)
            # Selector transitions look like ADDED/DELETED to this watcher, as upstream's watch cache does.
            if now and before:
                self.queue.put_nowait(("MODIFIED", obj))
            elif now:
                self.queue.put_nowait(("ADDED", obj))
            elif before:
                self.queue.put_nowait(("DELETED", obj))
        elif now:
            self.queue.put_nowait((ev.type, obj))


@dataclass
class ResourceState:
    objects: dict[Key, Obj] = field(default_factory=dict)
    history: deque[Event] = field(default_factory=deque)
    # Watches may resume from any rv >= window_start; older ones get 410 Expired.
    window_start: int = 0
    watchers: set[Watcher] = field(default_factory=set)
