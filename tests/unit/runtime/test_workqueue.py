"""WorkQueue: per-key exclusivity and coalescing under arbitrary interleavings (hypothesis)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raybus.runtime.workqueue import WorkQueue


async def _drive(adds: list[tuple[int, int]], workers: int) -> tuple[dict[int, int], set[int], int]:
    queue: WorkQueue[int, int] = WorkQueue()
    running: set[int] = set()
    overlaps: set[int] = set()
    runs: dict[int, int] = {}
    acked: list[int] = []

    async def worker() -> None:
        while True:
            key, tokens = await queue.get()
            if key in running:
                overlaps.add(key)
            running.add(key)
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            running.discard(key)
            runs[key] = runs.get(key, 0) + 1
            acked.extend(tokens)
            queue.done(key)

    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    for i, (key, pause) in enumerate(adds):
        queue.add(key, i)
        for _ in range(pause):
            await asyncio.sleep(0)
    for _ in range(200):
        await asyncio.sleep(0)
    for t in tasks:
        t.cancel()
    return runs, overlaps, len(acked)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)), min_size=1, max_size=60),
       st.integers(1, 4))
def test_exclusive_coalesced_and_every_token_acked(adds: list[tuple[int, int]], workers: int) -> None:
    runs, overlaps, acked = asyncio.run(_drive(adds, workers))
    assert overlaps == set()
    assert acked == len(adds)  # every add's token is handed to exactly one run
    for key in {k for k, _ in adds}:
        assert 1 <= runs[key] <= sum(1 for k, _ in adds if k == key)


def test_burst_while_running_collapses_to_one_more_run() -> None:
    async def scenario() -> int:
        queue: WorkQueue[str, None] = WorkQueue()
        queue.add("a")
        key, _ = await queue.get()
        for _ in range(50):
            queue.add("a")
        queue.done(key)
        await queue.get()
        return len(queue)

    assert asyncio.run(scenario()) == 0


def test_forget_drops_keys_and_returns_their_tokens() -> None:
    async def scenario() -> tuple[list[int], str]:
        queue: WorkQueue[str, int] = WorkQueue()
        queue.add("drop", 1)
        queue.add("keep", 2)
        dropped = queue.drop(lambda k: k != "drop")
        key, _ = await queue.get()
        return dropped, key

    dropped, key = asyncio.run(scenario())
    assert dropped == [1] and key == "keep"


async def test_waiting_lists_queued_and_scheduled_keys() -> None:
    q: WorkQueue[str, int] = WorkQueue()
    q.add("queued")
    q.add_after("later", 30.0)
    q.add("running")
    assert await q.get() in (("queued", []), ("running", []))
    assert sorted(q.waiting(lambda k: True)) in (["later", "running"], ["later", "queued"])
    assert q.waiting(lambda k: k == "later") == ["later"]
    q.drop(lambda k: False)
    assert q.waiting(lambda k: True) == []


async def test_add_soon_folds_a_burst_into_one_run_and_keeps_every_token() -> None:
    queue: WorkQueue[str, int] = WorkQueue()
    for token in range(5):  # five events for one object within the debounce window
        queue.add_soon("k", token, 0.05)
    assert len(queue) == 0  # not runnable yet
    key, tokens = await asyncio.wait_for(queue.get(), 2)
    assert key == "k" and tokens == [0, 1, 2, 3, 4]  # one run acks them all
    queue.done("k")
    queue.add_soon("k", 5, 0.0)  # no debounce: at once
    assert (await asyncio.wait_for(queue.get(), 2)) == ("k", [5])


async def test_dropping_a_partition_returns_tokens_waiting_in_a_debounce() -> None:
    queue: WorkQueue[str, int] = WorkQueue()
    queue.add_soon("gone", 1, 10.0)
    queue.add_soon("kept", 2, 10.0)
    assert queue.drop(lambda k: k == "kept") == [1]


async def _next_within(queue: WorkQueue[str, int], seconds: float) -> tuple[str, list[int]] | None:
    """The next runnable key if one comes within `seconds` (a bound on absence, far below the
    intervals under test), else None."""
    try:
        return await asyncio.wait_for(queue.get(), seconds)
    except TimeoutError:
        return None


async def test_a_busy_key_runs_at_most_once_per_min_interval_and_a_quiet_key_at_once() -> None:
    queue: WorkQueue[str, int] = WorkQueue(min_interval_s=5.0)
    queue.add_soon("busy", 1, 0.01)
    assert await asyncio.wait_for(queue.get(), 2) == ("busy", [1])
    queue.done("busy")
    queue.add_soon("busy", 2, 0.01)  # an event right after its run: folded into a run 5 s later
    queue.add_soon("quiet", 3, 0.01)  # never ran: only the debounce
    assert await asyncio.wait_for(queue.get(), 2) == ("quiet", [3])
    queue.done("quiet")
    assert await _next_within(queue, 0.5) is None, "the busy key ran again within its min interval"
    assert queue.drop(lambda k: False) == [2]  # its token still waits, to be acked by that run


async def test_a_run_replaces_the_requeue_an_earlier_run_asked_for() -> None:
    queue: WorkQueue[str, int] = WorkQueue()
    queue.add_after("k", 0.2)  # an earlier run's RequeueAfter
    queue.add("k", 1)  # an event before it fires: this run reads what the requeue waited for
    assert await asyncio.wait_for(queue.get(), 2) == ("k", [1])
    assert queue.waiting(lambda k: True) == []  # nothing left scheduled for it
    queue.done("k")
    assert await _next_within(queue, 0.6) is None, "the superseded requeue still ran"


async def test_add_after_earliest_keeps_a_sooner_requeue_and_replaces_a_later_one() -> None:
    q: WorkQueue[str, int] = WorkQueue()
    loop = asyncio.get_running_loop()
    q.add_after("a", 0.05)
    q.add_after("a", 30.0, earliest=True)  # later: the sooner one stays
    key, _ = await asyncio.wait_for(q.get(), timeout=2.0)
    assert key == "a"
    q.done("a")
    q.add_after("b", 30.0)
    started = loop.time()
    q.add_after("b", 0.05, earliest=True)  # sooner: replaces
    key, _ = await asyncio.wait_for(q.get(), timeout=2.0)
    assert key == "b" and loop.time() - started < 2.0
    q.add_after("c", 0.05)
    q.add_after("c", 30.0)  # without earliest the newer request wins, as before
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(q.get(), timeout=0.3)
