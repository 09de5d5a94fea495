"""Typed aiohttp app key holding the server's shared state (avoids stringly-typed app[...] lookups)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .paging import ListSnapshots
from .resources import Registry
from .store import Store

if TYPE_CHECKING:
    from .faults import ApiFaults


@dataclass
class ServerState:
    registry: Registry
    store: Store
    watch_timeout: float = 1800.0
    bookmark_interval: float = 60.0
    gc: Any = None
    kubelet: Any = None
    sim_handler: Callable[[web.Request, list[str]], Awaitable[web.StreamResponse]] | None = None
    snapshots: ListSnapshots = field(default_factory=ListSnapshots)
    # the WatchList feature gate (off by default in 1.33: sendInitialEvents is refused)
    watch_list: bool = False
    authenticator: Any = None
    authorizer: Any = None
    faults: ApiFaults | None = None  # the chaos soak's 429/500/timeout switch


STATE: web.AppKey[ServerState] = web.AppKey("raybus_sim_apiserver", ServerState)
