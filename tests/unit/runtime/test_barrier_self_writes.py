"""WriteBarrier: a batch that wrote the object itself (a RayJob's finalizer patch, its own
deletion) holds the next decision until the snapshot shows that write."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from raybus.bus import subjects as s
from raybus.bus.envelopes import CommandResult, ObjectKey, Outcome
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


def barrier(cache: Cache, outcomes: Outcomes, clock: list[float]) -> WriteBarrier:
    return WriteBarrier(cache=cache, outcomes=outcomes, batches=None, ledger=None,  # type: ignore[arg-type]
                        kind=s.Kind.RAYJOB, clock=lambda: clock[0], patience_s=30.0)


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
