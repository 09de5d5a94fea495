"""In-flight write suppression: same status / same owned-object create not re-sent until seen
or the window passes; a newer status waits while one is in flight (backpressure) and is asked for
again when that settles; pods are never filtered (scale expectations cover them)."""

from __future__ import annotations

from raybus.bus.envelopes import ObjectKey
from raybus.decisions.commands import CreateObject
from raybus.runtime.inflight import InFlightWrites

KEY = ObjectKey(namespace="ns", name="rc")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _create(kind: str, name: str) -> CreateObject:
    return CreateObject(reason="r", object={"kind": kind, "metadata": {"name": name, "namespace": "ns"}})


def _differs(old: dict[str, object] | None, new: dict[str, object]) -> bool:
    strip = {"lastUpdateTime"}
    return {k: v for k, v in (old or {}).items() if k not in strip} != \
        {k: v for k, v in new.items() if k not in strip}


def test_status_resent_only_when_changed_or_window_after_outcome_passed() -> None:
    clock = Clock()
    ready: list[ObjectKey] = []
    inflight = InFlightWrites(window_s=10, max_wait_s=100, clock=clock, differs=_differs,
                              status_max_wait_s=100)
    inflight.on_ready = ready.append
    status = {"state": "ready", "readyWorkerReplicas": 1, "lastUpdateTime": "a"}
    assert not inflight.status_pending(KEY, status)
    inflight.mark_status(KEY, status, batch_id="b1")
    assert inflight.status_pending(KEY, {**status, "lastUpdateTime": "b"})  # ignored field
    # A newer status while b1 is in flight waits (one queued status write per object)...
    assert inflight.status_pending(KEY, {**status, "readyWorkerReplicas": 2})
    clock.now = 50  # still queued in the executor (e.g. behind the QPS limiter): still pending
    assert inflight.status_pending(KEY, status)
    assert not ready
    inflight.settle("b1")
    assert ready == [KEY]  # ...and is asked for once b1 settles
    assert not inflight.status_pending(KEY, {**status, "readyWorkerReplicas": 2})
    clock.now = 59
    assert inflight.status_pending(KEY, status)
    clock.now = 61  # 10 s after the Outcome and still not in the cache: lost, send again
    assert not inflight.status_pending(KEY, status)


def test_settling_without_a_held_status_asks_for_nothing() -> None:
    ready: list[ObjectKey] = []
    inflight = InFlightWrites(window_s=10, max_wait_s=100, clock=Clock())
    inflight.on_ready = ready.append
    inflight.mark_status(KEY, {"state": "ready"}, batch_id="b1")
    assert inflight.status_pending(KEY, {"state": "ready"})  # identical: nothing held
    inflight.settle("b1")
    assert ready == []


def test_forgetting_one_of_two_objects_keeps_the_other() -> None:
    """Regression: forget() unpacked (status, batch_id) in the wrong order (TypeError: unhashable
    type: 'dict') whenever another object still had a status in flight."""
    inflight = InFlightWrites(window_s=10, max_wait_s=100, clock=Clock())
    other = ObjectKey(namespace="ns", name="rc2")
    inflight.mark_status(KEY, {"state": "ready"}, batch_id="b1")
    inflight.mark_status(other, {"state": "ready"}, batch_id="b2")
    inflight.drop_pending_creates(other, [_create("Service", "rc2-head-svc")], batch_id="b3")
    inflight.forget(KEY)
    assert not inflight.status_pending(KEY, {"state": "ready"})
    assert inflight.status_pending(other, {"state": "ready"})
    assert inflight.drop_pending_creates(other, [_create("Service", "rc2-head-svc")], batch_id="b4") == []


def test_batch_without_outcome_expires_after_max_wait() -> None:
    clock = Clock()
    inflight = InFlightWrites(window_s=10, max_wait_s=100, clock=clock)
    inflight.mark_status(KEY, {"state": "ready"}, batch_id="lost")
    clock.now = 101
    assert not inflight.status_pending(KEY, {"state": "ready"})


def test_owned_object_create_sent_once_per_window_pods_always() -> None:
    clock = Clock()
    inflight = InFlightWrites(window_s=10, max_wait_s=100, clock=clock)
    batch = [_create("Service", "rc-head-svc"), _create("Pod", "rc-head-abcde")]
    assert inflight.drop_pending_creates(KEY, batch, batch_id="b1") == batch
    assert inflight.drop_pending_creates(KEY, batch, batch_id="b2") == [batch[1]]
    other = ObjectKey(namespace="ns", name="rc2")
    assert inflight.drop_pending_creates(other, [batch[0]], batch_id="b3") == [batch[0]]  # per owner
    inflight.settle("b1")
    clock.now = 11
    assert inflight.drop_pending_creates(KEY, batch, batch_id="b4") == batch
    inflight.forget(KEY)
    assert inflight.drop_pending_creates(KEY, batch, batch_id="b5") == batch


def test_old_batches_are_pruned_and_then_read_as_expired() -> None:
    clock = Clock()
    inflight = InFlightWrites(window_s=10, max_wait_s=100, clock=clock)

    def send(i: int) -> None:
        inflight.mark_status(ObjectKey(namespace="ns", name=f"c{i}"), {"state": "ready"}, batch_id=f"b{i}")
        inflight.settle(f"b{i}")

    for i in range(1100):
        send(i)
    assert len(inflight._sent) == 1100  # all fresh: nothing can go yet
    clock.now = 20
    for i in range(1100, 3300):
        send(i)
        # Bounded: old batches go once the map has grown past twice its size after a prune.
        assert len(inflight._sent) <= 2 * 1101 + 1
    assert "b5" not in inflight._sent  # settled 20 s ago, window 10 s
    assert not inflight.status_pending(ObjectKey(namespace="ns", name="c5"), {"state": "ready"})


def test_prune_is_amortized_while_every_batch_is_fresh() -> None:
    clock = Clock()
    inflight = InFlightWrites(window_s=10, max_wait_s=100, clock=clock)
    scans = 0
    real_prune = inflight._prune

    def counting_prune() -> None:
        nonlocal scans
        scans += 1
        real_prune()

    inflight._prune = counting_prune  # type: ignore[method-assign]
    for i in range(5000):
        inflight.mark_status(ObjectKey(namespace="ns", name=f"c{i}"), {"state": "ready"}, batch_id=f"b{i}")
        inflight.settle(f"b{i}")
    assert scans <= 3  # 1024 -> 2050 -> 4100: a scan per Outcome would be quadratic


def test_status_whose_publish_failed_is_sent_again_at_once() -> None:
    """A status write whose publish failed (no stream leader while a NATS node was down) gets no
    Outcome: unmarked, the retry sends it again instead of holding it back for max_wait."""
    clock = Clock()
    inflight = InFlightWrites(window_s=10, max_wait_s=300, clock=clock, differs=_differs)
    status = {"state": "ready", "readyWorkerReplicas": 4}
    inflight.mark_status(KEY, status, batch_id="s1")
    assert inflight.status_pending(KEY, status)  # in flight: held back
    inflight.status_not_sent(KEY, "other")  # another batch's failure changes nothing
    assert inflight.status_pending(KEY, status)
    inflight.status_not_sent(KEY, "s1")
    assert not inflight.status_pending(KEY, status)
    assert inflight.status_wait(KEY, urgent=False, interval_s=5) == 0.0


def test_a_failed_status_write_asks_for_a_reconcile_that_resends_after_the_window() -> None:
    """Before issue 20 the reconciler requeued every 2 s while a status differed from the cache,
    which also resent a failed one once the window passed. Now the failure itself asks for a
    reconcile, and that one sees when the same status may go again (status_expires_in)."""
    clock = Clock()
    failed: list[ObjectKey] = []
    inflight = InFlightWrites(window_s=10, max_wait_s=100, clock=clock, differs=_differs)
    inflight.on_status_failed = failed.append
    status = {"state": "ready"}
    inflight.mark_status(KEY, status, batch_id="b1")
    inflight.settle("b1", status_failed=True)
    assert failed == [KEY]
    assert inflight.status_pending(KEY, status) and inflight.status_expires_in(KEY) == 10
    clock.now = 10.5
    assert not inflight.status_pending(KEY, status)  # sent again
    inflight.mark_status(KEY, status, batch_id="b2")
    inflight.settle("b2")  # succeeded: no reconcile asked for
    assert failed == [KEY] and inflight.status_pending(KEY, status)


def test_when_a_status_write_stops_holding_the_same_status_back() -> None:
    clock = Clock()
    inflight = InFlightWrites(window_s=10, max_wait_s=100, clock=clock, status_max_wait_s=40)
    assert inflight.status_expires_in(KEY) is None and inflight.since_status(KEY) is None
    inflight.mark_status(KEY, {"state": "ready"}, batch_id="b1")
    clock.now = 30
    assert inflight.since_status(KEY) == 30
    assert inflight.status_expires_in(KEY) == 10  # in flight: status_max_wait from when it was sent
    inflight.settle("b1")
    clock.now = 34
    assert inflight.status_expires_in(KEY) == 6  # settled at 30: the window after the Outcome
    clock.now = 50
    assert inflight.status_expires_in(KEY) == 0.0


def test_a_status_whose_outcome_never_comes_is_sent_again_long_before_a_lost_create() -> None:
    """An Outcome lost on the bus (RAYBUS_OUTCOMES keeps the last per object: a command batch's
    Outcome right after it replaces the status write's) holds that status back for
    status_max_wait only; a named create in flight still waits max_wait (a second create would
    be a 409, an extra API write per cluster at 1,000 clusters)."""
    clock = Clock()
    inflight = InFlightWrites(window_s=10, max_wait_s=300, clock=clock, differs=_differs)
    status = {"state": "ready", "readyWorkerReplicas": 1}
    inflight.mark_status(KEY, status, batch_id="s1")
    create = [CreateObject(reason="head svc", object={"kind": "Service", "metadata": {
        "namespace": "ns", "name": "c-head-svc"}})]
    assert inflight.drop_pending_creates(KEY, create, batch_id="c1") == create
    clock.now = 119
    assert inflight.status_pending(KEY, status)
    assert inflight.status_pending(KEY, {**status, "readyWorkerReplicas": 2})  # held behind it
    clock.now = 121  # no Outcome and not in the cache in 120 s: the newest status goes out
    assert not inflight.status_pending(KEY, {**status, "readyWorkerReplicas": 2})
    assert inflight.status_expires_in(KEY) == 0.0
    assert inflight.drop_pending_creates(KEY, create, batch_id="c2") == []  # still in flight
    clock.now = 301
    assert inflight.drop_pending_creates(KEY, create, batch_id="c3") == create


def test_a_status_write_that_landed_asks_for_the_requeue_after_it_and_counts_from_its_outcome() -> None:
    clock = Clock()
    written: list[ObjectKey] = []
    inflight = InFlightWrites(window_s=10, max_wait_s=100, clock=clock)
    inflight.on_status_written = written.append
    inflight.mark_status(KEY, {"state": "ready"}, batch_id="b1")
    clock.now = 7  # held by a busy executor: in flight, nothing written yet
    assert inflight.since_written(KEY) is None and not written
    inflight.settle("b1", written_rv="42")
    assert written == [KEY]  # KubeRay's 2 s requeue starts now, not at the send
    clock.now = 8.5
    assert inflight.since_written(KEY) == 1.5
    inflight.mark_status(KEY, {"state": "suspended"}, batch_id="b2")
    inflight.settle("b2", status_failed=True)  # refused: no "written" requeue (on_status_failed is)
    assert written == [KEY]


def test_a_status_the_cache_shows_counts_as_written_without_its_outcome() -> None:
    """The Outcome lost, the write landed: the watch brought it to the cache, so the newer status
    goes out at once instead of after status_max_wait."""
    clock = Clock()
    inflight = InFlightWrites(window_s=10, max_wait_s=300, clock=clock, differs=_differs)
    status = {"state": "ready", "readyWorkerReplicas": 1, "lastUpdateTime": "a"}
    newer = {**status, "readyWorkerReplicas": 2}
    inflight.mark_status(KEY, status, batch_id="s1")
    clock.now = 5
    assert inflight.status_pending(KEY, newer, cached={"state": "provisioning"})  # not written yet
    assert inflight.status_pending(KEY, newer, cached={**status, "lastUpdateTime": "b"}) is False
    assert inflight.status_pending(KEY, status, cached=status)  # the same one: just written
    clock.now = 16  # the window after "written" (5 s) passed and the cache never showed `status`
    assert not inflight.status_pending(KEY, status)
