"""The requeue of a round whose status is already on its way (runtime.status_writes.after_write): KubeRay
requeues 2 s after a status write returns, once; not every 2 s until our own write reaches the
cache, and not from when a write the executor holds back was sent."""

from __future__ import annotations

from raybus.runtime.status_writes import after_write

REQUEUE_S = 2.0  # KubeRay's DefaultRequeueDuration, the cluster-reconciler's requeue_s


def test_two_seconds_after_the_write_then_when_the_memo_expires_then_unchanged() -> None:
    assert after_write(300.0, since_written=0.5, expires_in=250.0, requeue_s=REQUEUE_S) == 1.5  # the write's 2 s
    assert after_write(300.0, since_written=None, expires_in=25.0, requeue_s=REQUEUE_S) == 25.0  # still in flight
    assert after_write(300.0, since_written=2.5, expires_in=7.5, requeue_s=REQUEUE_S) == 7.5  # the 2 s passed: window
    assert after_write(300.0, since_written=9.0, expires_in=3.0, requeue_s=REQUEUE_S) == 3.0  # settled, window ends
    assert after_write(300.0, since_written=None, expires_in=None, requeue_s=REQUEUE_S) == 300.0
    assert after_write(None, since_written=3.0, expires_in=None, requeue_s=REQUEUE_S) is None  # an error: rate limiter
    assert after_write(1.0, since_written=0.5, expires_in=None, requeue_s=REQUEUE_S) == 1.0
