"""A failed owned-object create is not "in flight": the next decision's create goes out at once
(issue 13: a PodGroup create refused because its CRD is missing is retried with the backoff)."""

from __future__ import annotations

from raybus.bus.envelopes import ObjectKey
from raybus.decisions.commands import CreateObject
from raybus.runtime.inflight import InFlightWrites

KEY = ObjectKey(namespace="ns", name="rc")


def _create(kind: str, name: str) -> CreateObject:
    return CreateObject(reason="r", object={"kind": kind, "metadata": {"name": name, "namespace": "ns"}})


def test_failed_create_is_resent_but_a_newer_attempt_is_not_duplicated() -> None:
    now = [0.0]
    inflight = InFlightWrites(window_s=10, max_wait_s=100, clock=lambda: now[0])
    pg = _create("PodGroup", "rc")
    assert inflight.drop_pending_creates(KEY, [pg], batch_id="b1") == [pg]
    inflight.settle("b1")
    now[0] = 1.0
    assert inflight.drop_pending_creates(KEY, [pg], batch_id="b2") == []  # within the window
    inflight.create_failed(KEY, "PodGroup/ns/rc", batch_id="b1")
    assert inflight.drop_pending_creates(KEY, [pg], batch_id="b3") == [pg]  # retried at once
    # The old failure reported again (same Outcome read on a later round) must not re-open b3's.
    inflight.create_failed(KEY, "PodGroup/ns/rc", batch_id="b1")
    assert inflight.drop_pending_creates(KEY, [pg], batch_id="b4") == []
    # Another object's failure leaves this one alone.
    inflight.create_failed(KEY, "Service/ns/rc-head-svc", batch_id="b3")
    assert inflight.drop_pending_creates(KEY, [pg], batch_id="b5") == []
