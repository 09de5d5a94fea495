"""client-go's token bucket (KubeRay's --kube-api-qps / --kube-api-burst), its tokens handed out
oldest work first.

KubeRay reconciles one RayCluster at a time: its worker creates that cluster's head and workers
one after the other, each through the same limiter, then moves on to the next cluster. The
command executor applies many batches at once (so API latency does not cap the rate); with a
first-come limiter their creates interleave, and with 1,000 clusters applied together every
cluster waited for the limiter's whole run to get its last Pod. Then every cluster stays
provisioning for the whole run, and is reconciled and has its status written for all of it.
Handing each token to the lowest `WRITE_PRIORITY` waiting (the batch that arrived
first) keeps KubeRay's order: one cluster's creates finish before the next's, while the other
batches' requests still fill every token the first leaves unused.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from contextvars import ContextVar

from aiolimiter import AsyncLimiter

# Set by the executor for the task applying a batch (the loop time it arrived): lower is served
# first; 0 (no batch) first.
WRITE_PRIORITY: ContextVar[float] = ContextVar("raybus_write_priority", default=0.0)


class PriorityLimiter:
    def __init__(self, limiter: AsyncLimiter) -> None:
        self._limiter = limiter
        self._waiting: list[tuple[float, int, asyncio.Future[None]]] = []
        self._tiebreak = itertools.count()  # FIFO among equal priorities
        self._pump: asyncio.Task[None] | None = None

    async def acquire(self) -> None:
        if not self._waiting and self._limiter.has_capacity():
            await self._limiter.acquire()  # a free token and nobody ahead: no suspension
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (WRITE_PRIORITY.get(), next(self._tiebreak), future))
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._hand_out())
        await future  # cancelled while waiting: the pump skips it

    async def _hand_out(self) -> None:
        while self._waiting:
            await self._limiter.acquire()
            while self._waiting:
                _, _, future = heapq.heappop(self._waiting)
                if not future.done():
                    future.set_result(None)
                    break

    async def close(self) -> None:
        if self._pump is not None and not self._pump.done():
            self._pump.cancel()
            await asyncio.gather(self._pump, return_exceptions=True)
        for _, _, future in self._waiting:
            future.cancel()
        self._waiting.clear()
