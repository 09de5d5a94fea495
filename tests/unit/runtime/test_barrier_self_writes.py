"""WriteBarrier: a batch that wrote the object itself (a RayJob's finalizer patch, its own
deletion) holds the next decision until the snapshot shows that write; a missed Outcome (one
last-value subject per object) is resolved through the ledger or the snapshot, not after 30 s."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from raybus.bus import subjects as s
from raybus.bus.envelopes import CommandResult, ObjectKey, Outcome
from raybus.decisions.batches import IN_FLIGHT, BatchState
from raybus.runtime.barrier import WriteBarrier

KEY = ObjectKey(namespace="ns", name="j1")


class Cache:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}

    def get(self, kind: s.Kind, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((kind.value, namespace, name))

    def put(self, rv: str | None) -> None:
        if rv is None:
            self.objects.pop(("rayjob", "ns", "j1"), None)
        else:
            self.objects[("rayjob", "ns", "j1")] = {"metadata": {"name": "j1", "resourceVersion": rv}}


class Outcomes:
    def __init__(self) -> None:
        self.by_batch: dict[str, Outcome] = {}


def outcome(batch: str, *results: tuple[str, str, bool]) -> Outcome:
    return Outcome(key=KEY, kind="rayjob", controller="job", reconcile_id=batch, finished_at=datetime.now(UTC),
                   results=[CommandResult(op=op, target=target, ok=ok) for op, target, ok in results])


class Batches:
    """The resolver's answer for batches without an Outcome (the ledger, after a few seconds)."""

    def __init__(self) -> None:
        self.settled: set[str] = set()

    async def state(self, batch: str) -> BatchState:
        return BatchState(settled=True, finished_at=datetime.now(UTC)) if batch in self.settled else IN_FLIGHT


def barrier(cache: Cache, outcomes: Outcomes, clock: list[float], batches: Batches | None = None) -> WriteBarrier:
    return WriteBarrier(cache=cache, outcomes=outcomes, batches=batches or Batches(),  # type: ignore[arg-type]
                        ledger=None, kind=s.Kind.RAYJOB, controller="job", clock=lambda: clock[0],  # type: ignore[arg-type]
                        patience_s=30.0)


@pytest.mark.parametrize(("results", "cache_rv_after", "ready"), [
    # The finalizer patch applied: wait until the watcher delivered the new version.
    ([("patch_object", "RayJob/ns/j1", True)], "1", False),
    ([("patch_object", "RayJob/ns/j1", True)], "2", True),
    # DeleteSelf: the object gone (or any newer version) releases the barrier.
    ([("delete_object", "RayJob/ns/j1", True)], None, True),
    # Writes to other objects only need their Outcome (creates are idempotent by name).
    ([("create_object", "RayCluster/ns/j1-abcde", True)], "1", True),
    ([("patch_object", "RayJob/ns/other", True)], "1", True),
    # A failed patch changed nothing: decide again at once (on the failure).
    ([("patch_object", "RayJob/ns/j1", False)], "1", True),
])
def test_own_writes_must_be_visible(results: list[tuple[str, str, bool]], cache_rv_after: str | None,
                                    ready: bool) -> None:
    cache, outcomes, clock = Cache(), Outcomes(), [0.0]
    cache.put("1")
    b = barrier(cache, outcomes, clock)
    b.wrote(KEY, batch="b1", status=None, dashboard=[], base_rv="1")
    assert not asyncio.run(b.ready(KEY))  # no Outcome yet
    outcomes.by_batch["b1"] = outcome("b1", *results)
    cache.put(cache_rv_after)
    assert asyncio.run(b.ready(KEY)) is ready


def test_an_invisible_own_write_is_let_go_after_patience() -> None:
    cache, outcomes, clock = Cache(), Outcomes(), [0.0]
    cache.put("1")
    b = barrier(cache, outcomes, clock)
    b.wrote(KEY, batch="b1", status=None, dashboard=[], base_rv="1")
    outcomes.by_batch["b1"] = outcome("b1", ("patch_object", "RayJob/ns/j1", True))
    assert not asyncio.run(b.ready(KEY))
    clock[0] = 31.0
    assert asyncio.run(b.ready(KEY))


def test_a_missed_batch_outcome_is_answered_by_the_ledger() -> None:
    cache, outcomes, clock, batches = Cache(), Outcomes(), [0.0], Batches()
    cache.put("1")
    b = barrier(cache, outcomes, clock, batches)
    b.wrote(KEY, batch="b1", status=None, dashboard=[], base_rv="1")
    assert not asyncio.run(b.ready(KEY))
    batches.settled.add("b1")  # its Outcome was overwritten on the object's subject; the ledger has it
    assert asyncio.run(b.ready(KEY))


@pytest.mark.parametrize(("outcome_ok", "cache_rv", "ready"), [
    (None, "1", False),  # no Outcome, nothing visible yet
    (None, "2", True),  # no Outcome (missed), but the snapshot moved on: a pending write can only 409
    (True, "1", False),  # written, not visible yet
    (True, "2", True),
    (False, "1", True),  # refused (409): decide again at once
])
def test_status_write_answers(outcome_ok: bool | None, cache_rv: str, ready: bool) -> None:
    cache, outcomes, clock = Cache(), Outcomes(), [0.0]
    cache.put("1")
    b = barrier(cache, outcomes, clock)
    b.wrote(KEY, batch=None, status=("b1-status", "1"), dashboard=[], base_rv="1")
    if outcome_ok is not None:
        outcomes.by_batch["b1-status"] = outcome("b1-status", ("update_status", "RayJob/ns/j1", outcome_ok))
    cache.put(cache_rv)
    assert asyncio.run(b.ready(KEY)) is ready
