"""Per-object memos for pure, repeated work inside a reconcile.

A RayCluster is reconciled ~30 times while it converges, on the very same parsed object until its
next watch event; defaulting, validating and hashing it again each time was a third of the
cluster-reconciler's CPU at 300 clusters (bench_clusters --profile). A memo holds one entry per
object name and answers only when every input is the *same object* (`is`): a changed object is a
new object, so a hit can never return a stale result, and holding the inputs keeps their ids from
being reused. Inputs must not be mutated in place (the decision code only copies).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class LastPerObject(Generic[V]):
    def __init__(self, limit: int = 50_000) -> None:
        self._limit = limit  # deleted objects' entries are dropped wholesale past this
        self._last: dict[Hashable, tuple[tuple[object, ...], V]] = {}

    def get(self, key: Hashable, inputs: tuple[object, ...], compute: Callable[[], V]) -> V:
        hit = self._last.get(key)
        if hit is not None and len(hit[0]) == len(inputs) and all(a is b for a, b in zip(hit[0], inputs)):
            return hit[1]
        value = compute()
        if len(self._last) >= self._limit:
            self._last.clear()
        self._last[key] = (inputs, value)
        return value
