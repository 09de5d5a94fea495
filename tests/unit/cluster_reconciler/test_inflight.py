"""In-flight write suppression: same status / same owned-object create not re-sent until seen
or the window passes; pods are never filtered (scale expectations cover them)."""

from __future__ import annotations

from cluster_reconciler.inflight import InFlightWrites
from raybus.bus.envelopes import ObjectKey
from raybus.decisions.commands import CreateObject

KEY = ObjectKey(namespace="ns", name="rc")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _create(kind: str, name: str) -> CreateObject:
    return CreateObject(reason="r", object={"kind": kind, "metadata": {"name": name, "namespace": "ns"}})


def test_status_resent_only_when_changed_or_window_passed() -> None:
    clock = Clock()
    inflight = InFlightWrites(window_s=10, clock=clock)
    status = {"state": "ready", "readyWorkerReplicas": 1, "lastUpdateTime": "a"}
    assert not inflight.status_pending(KEY, status)
    inflight.mark_status(KEY, status)
    assert inflight.status_pending(KEY, {**status, "lastUpdateTime": "b"})  # ignored field
    assert not inflight.status_pending(KEY, {**status, "readyWorkerReplicas": 2})
    clock.now = 11
    assert not inflight.status_pending(KEY, status)


def test_owned_object_create_sent_once_per_window_pods_always() -> None:
    clock = Clock()
    inflight = InFlightWrites(window_s=10, clock=clock)
    batch = [_create("Service", "rc-head-svc"), _create("Pod", "rc-head-abcde")]
    assert inflight.drop_pending_creates(KEY, batch) == batch
    assert inflight.drop_pending_creates(KEY, batch) == [batch[1]]
    other = ObjectKey(namespace="ns", name="rc2")
    assert inflight.drop_pending_creates(other, [batch[0]]) == [batch[0]]  # per owner
    clock.now = 11
    assert inflight.drop_pending_creates(KEY, batch) == batch
    inflight.forget(KEY)
    assert inflight.drop_pending_creates(KEY, batch) == batch
