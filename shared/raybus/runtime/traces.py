"""Which trace a reconcile belongs to.

An object's reconciles within ORIGIN_TRACE_S of its creation are spans of the creation's trace
(the watcher's span of the ADDED event, carried by the trigger), so a RayJob from its creation to
its submission, or a RayCluster from its creation to ready, reads as one trace across services.
Later reconciles are children of what woke them. Either way each run links every distinct
message or cache event that woke it (a debounced run folds several).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link

ORIGIN_TRACE_S = 600.0
_KEPT = 4096  # creations remembered before the old ones are dropped


class ReconcileTraces:
    def __init__(self, created_cause: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._created_cause = created_cause  # a trigger cause label: "ADDED <primary kind>"
        self._clock = clock
        self._origins: dict[Hashable, tuple[otel_context.Context, float]] = {}

    def woke(self, key: Hashable, cause: str, ctx: otel_context.Context) -> None:
        """A trigger for `key` arrived; the creation's is remembered."""
        if cause == self._created_cause and key not in self._origins:
            self._origins[key] = (ctx, self._clock())

    def parent(self, key: Hashable, woken_by: list[otel_context.Context]) -> otel_context.Context | None:
        """The creation's trace while it is recent, else the trace of the last thing that woke it."""
        now = self._clock()
        if len(self._origins) > _KEPT:
            self._origins = {k: o for k, o in self._origins.items() if now - o[1] < ORIGIN_TRACE_S}
        origin = self._origins.get(key)
        if origin is not None and now - origin[1] < ORIGIN_TRACE_S:
            return origin[0]
        self._origins.pop(key, None)
        return woken_by[-1] if woken_by else None


def links(contexts: Iterable[otel_context.Context]) -> list[Link]:
    """A link to each distinct span in `contexts` (SpanContext is unhashable: its TraceState)."""
    seen: dict[tuple[int, int], Link] = {}
    for ctx in contexts:
        span = trace.get_current_span(ctx).get_span_context()
        if span.is_valid:
            seen.setdefault((span.trace_id, span.span_id), Link(span))
    return list(seen.values())
