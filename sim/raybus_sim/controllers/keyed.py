"""What the simulated controllers share: a set of dirty namespace/name keys and one loop that syncs
them, retrying a key whose sync hit an API error (a tiny stand-in for client-go's workqueue)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from raybus_sim.apiserver.errors import ApiError
from raybus_sim.apiserver.store import Obj, Store

log = logging.getLogger(__name__)


class KeyedController:
    name = "controller"

    def __init__(self, store: Store, *, debounce: float = 0.0) -> None:
        self.store = store
        self.debounce = debounce
        self.dirty: set[tuple[str, str]] = set()
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def mark(self, namespace: str, name: str) -> None:
        self.dirty.add((namespace, name))
        self.wake.set()

    def start_with(self, objects: Iterable[Obj]) -> None:
        for obj in objects:
            self.mark(obj["metadata"]["namespace"], obj["metadata"]["name"])
        self.wake.set()
        self.task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        if self.task:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    def sync(self, ns: str, name: str) -> None:
        raise NotImplementedError

    async def run(self) -> None:
        while True:
            await self.wake.wait()
            await asyncio.sleep(self.debounce)  # coalesce bursts (e.g. 1,000 pods turning Ready)
            self.wake.clear()
            batch, self.dirty = self.dirty, set()
            for ns, name in batch:
                try:
                    self.sync(ns, name)
                except ApiError as err:
                    log.debug("%s %s/%s: %s", self.name, ns, name, err.message)
                    self.mark(ns, name)
