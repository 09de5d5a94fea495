"""The executor's API limiter (raybus.adapters.priority_limiter): client-go's token bucket, each
token to the oldest batch waiting, so one RayCluster's creates finish before the next's (KubeRay's
one-cluster-at-a-time order) while the rate stays the bucket's."""

from __future__ import annotations

import asyncio
import contextvars

from aiolimiter import AsyncLimiter
from hypothesis import given, settings
from hypothesis import strategies as st

from raybus.adapters.priority_limiter import WRITE_PRIORITY, PriorityLimiter


async def _batch(limiter: PriorityLimiter, priority: int, calls: int, log: list[int]) -> None:
    WRITE_PRIORITY.set(priority)
    for _ in range(calls):
        await limiter.acquire()
        log.append(priority)


def _run(priority: int, limiter: PriorityLimiter, calls: int, log: list[int]) -> asyncio.Task[None]:
    # Each batch in its own task and context, as the executor's pull workers run them.
    return asyncio.create_task(_batch(limiter, priority, calls, log), context=contextvars.copy_context())


async def test_tokens_go_to_the_oldest_batch_and_the_rate_is_the_buckets() -> None:
    limiter = PriorityLimiter(AsyncLimiter(max_rate=2, time_period=0.1))  # burst 2, 20 per second
    log: list[int] = []
    started = asyncio.get_running_loop().time()
    # Started newest first: a first-come limiter would serve 3 before 1.
    tasks = [_run(p, limiter, 4, log) for p in (3, 2, 1)]
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)
    elapsed = asyncio.get_running_loop().time() - started
    # The burst goes to whoever asks first; after that, batch 1's calls, then 2's, then 3's.
    assert log[:2] == [3, 3]
    assert log[2:] == sorted(log[2:])
    assert elapsed >= (12 - 2) / 20 * 0.9  # 10 tokens beyond the burst at 20 per second
    await limiter.close()


@settings(max_examples=30, deadline=None)
@given(batches=st.lists(st.tuples(st.integers(0, 5), st.integers(1, 4)), min_size=1, max_size=6),
       cancel=st.sets(st.integers(0, 5)))
def test_every_caller_not_cancelled_gets_all_its_tokens(batches: list[tuple[int, int]], cancel: set[int]) -> None:
    async def run() -> None:
        limiter = PriorityLimiter(AsyncLimiter(max_rate=1, time_period=0.005))
        logs: list[list[int]] = [[] for _ in batches]
        tasks = [_run(p, limiter, n, logs[i]) for i, (p, n) in enumerate(batches)]
        await asyncio.sleep(0)
        for i in cancel & set(range(len(tasks))):
            tasks[i].cancel()
        # A cancelled waiter must not stall the others (the pump skips it): no timeout here.
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=10)
        for i, (_, n) in enumerate(batches):
            if not tasks[i].cancelled():
                assert len(logs[i]) == n
        await limiter.close()

    asyncio.run(run())
