"""The simulated node's Pod write slots (raybus_sim.kubelet.client.WriteSlots): oldest Pod first,
never more than `size` at once, and a cancelled waiter neither holds nor loses a slot."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from raybus_sim.kubelet.client import WriteSlots


async def _hold(slots: WriteSlots, order: int, gate: asyncio.Event, log: list[int],
                running: list[int], peak: list[int]) -> None:
    async with slots.slot(order):
        running.append(order)
        peak[0] = max(peak[0], len(running))
        log.append(order)
        try:
            await gate.wait()
        finally:
            running.remove(order)


async def test_waiters_get_a_slot_oldest_first() -> None:
    slots = WriteSlots(1)
    gate, log, running, peak = asyncio.Event(), [], [], [0]
    first = asyncio.create_task(_hold(slots, 50, gate, log, running, peak))
    await asyncio.sleep(0)
    waiters = [asyncio.create_task(_hold(slots, o, gate, log, running, peak)) for o in (9, 3, 7, 1)]
    await asyncio.sleep(0)
    assert log == [50]  # the free slot went to the first caller; the rest wait
    gate.set()
    await asyncio.gather(first, *waiters)
    assert log == [50, 1, 3, 7, 9]
    assert peak == [1]


@settings(max_examples=50, deadline=None)
@given(size=st.integers(1, 4), orders=st.lists(st.integers(0, 20), min_size=1, max_size=12),
       cancel=st.sets(st.integers(0, 11)))
def test_never_more_than_size_and_cancelled_waiters_free_their_place(size: int, orders: list[int],
                                                                     cancel: set[int]) -> None:
    async def run() -> None:
        slots = WriteSlots(size)
        gate, log, running, peak = asyncio.Event(), [], [], [0]
        tasks = [asyncio.create_task(_hold(slots, o, gate, log, running, peak)) for o in orders]
        await asyncio.sleep(0)
        for i in cancel & set(range(len(tasks))):
            tasks[i].cancel()
        gate.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert peak[0] <= size
        # Every slot came back: `size` holders can enter at once again, without waiting.
        held = [slots.slot(0) for _ in range(size)]
        for cm in held:
            await asyncio.wait_for(cm.__aenter__(), timeout=1.0)
        for cm in held:
            await cm.__aexit__(None, None, None)

    asyncio.run(run())


async def test_a_slot_handed_to_a_waiter_cancelled_before_it_ran_is_passed_on() -> None:
    slots = WriteSlots(1)
    holder = slots.slot(5)
    await holder.__aenter__()
    entered: list[int] = []

    async def wait_for_slot() -> None:
        async with slots.slot(1):
            entered.append(1)

    waiter = asyncio.create_task(wait_for_slot())
    await asyncio.sleep(0)  # now waiting on its future
    await holder.__aexit__(None, None, None)  # hands the slot to the waiter...
    waiter.cancel()  # ...which is cancelled before it resumes
    await asyncio.gather(waiter, return_exceptions=True)
    assert entered == []
    nxt = slots.slot(2)
    await asyncio.wait_for(nxt.__aenter__(), timeout=1.0)  # the slot was not lost
    await nxt.__aexit__(None, None, None)
