"""An informer cache of the API server's objects: what a component that must not trust the bus
(the command-executor, the dashboard-poller) knows exists, from its own list and watch.

Like KubeRay's informer cache: a list, then a watch from its resourceVersion (raybus.adapters.informer),
whole objects or their metadata only (PartialObjectMetadata), and the uids seen deleted, so a
reader can tell "gone" from "not seen yet". Memory reads only on the hot path.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from raybus.adapters.informer import Informer, Reconnect, watch_namespaces
from raybus.adapters.kube import KubeClient

Json = dict[str, Any]
GONE_KEPT = 65536  # deleted uids remembered (a batch naming one is refused without waiting)


@dataclass(frozen=True)
class Watched:
    """One informer's list/watch (raybus.adapters.informer.WatchSpec)."""

    name: str
    api_version: str
    k8s_kind: str
    label_selector: str | None = None
    owned_only: bool = False
    metadata_only: bool = False


def _slim(obj: Json) -> Json:
    """What no reader looks at is not kept (managedFields are a third of a small object)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return obj


class ApiView:
    """get(kind, namespace, name) and gone(uid) over one informer per watched kind and namespace
    (`namespace`: KubeRay's --watch-namespace, comma-separated; None or "" for all)."""

    def __init__(self, kube: KubeClient, watched: Iterable[Watched], *, namespace: str | None = None,
                 resync_s: float = 600.0) -> None:
        self._gone: OrderedDict[str, None] = OrderedDict()
        reconnect = Reconnect()
        self.namespaces = watch_namespaces(namespace)
        self.known: dict[str, dict[tuple[str, str], Json]] = {}
        self.informers: list[Informer] = []
        for w in watched:
            known = self.known.setdefault(w.k8s_kind, {})  # one per kind, whatever the namespaces
            self.informers += [Informer(kube, w, sink=self._sink, known=known, namespace=ns, resync_s=resync_s,
                                        reconnect=reconnect, transform=_slim, inline=True)
                               for ns in self.namespaces]
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self, timeout_s: float = 120.0) -> None:
        """Returns once every informer has listed: nothing is judged on a partial view."""
        self.tasks = [asyncio.create_task(inf.run()) for inf in self.informers]
        async with asyncio.timeout(timeout_s):
            await asyncio.gather(*(inf.synced.wait() for inf in self.informers))

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _sink(self, etype: str, obj: Json, old: Json | None) -> bool:
        if etype == "DELETED":
            uid = str((obj.get("metadata") or {}).get("uid") or "")
            if uid:
                self._gone[uid] = None
                while len(self._gone) > GONE_KEPT:
                    self._gone.popitem(last=False)
        return True

    def get(self, kind: str, namespace: str, name: str) -> Json | None:
        known = self.known.get(kind)
        return known.get((namespace, name)) if known is not None else None

    def gone(self, uid: str) -> bool:
        return uid in self._gone
