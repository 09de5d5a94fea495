"""Stopping tasks: a swallowed cancellation (Python 3.11's wait_for race) must not hang shutdown."""

from __future__ import annotations

import asyncio

from raybus.runtime.tasks import cancel_and_wait


async def _stubborn(swallow: int, ticks: list[int]) -> None:
    # Behaves like a fetch loop whose wait_for lost the cancel: it carries on after CancelledError.
    swallowed = 0
    while True:
        try:
            await asyncio.sleep(0.01)
            ticks.append(1)
        except asyncio.CancelledError:
            if swallowed >= swallow:
                raise
            swallowed += 1


async def test_task_that_swallows_cancels_is_still_stopped() -> None:
    ticks: list[int] = []
    task = asyncio.create_task(_stubborn(3, ticks))
    await asyncio.sleep(0.05)
    await cancel_and_wait([task], timeout_s=5, retry_s=0.02)
    assert task.cancelled()


async def test_failed_and_finished_tasks_are_fine() -> None:
    async def boom() -> None:
        raise RuntimeError("x")

    failed = asyncio.create_task(boom())
    finished = asyncio.create_task(asyncio.sleep(0))
    await asyncio.sleep(0.01)
    await cancel_and_wait([failed, finished])
    assert failed.done() and finished.done()
