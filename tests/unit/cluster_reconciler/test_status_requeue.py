"""The requeue of a round whose status is already on its way (cluster_reconciler.app): KubeRay
requeues 2 s after a status write returns, once; not every 2 s until our own write reaches the
cache, and not from when a write the executor holds back was sent."""

from __future__ import annotations

from cluster_reconciler.app import _after_write


def test_two_seconds_after_the_write_then_when_the_memo_expires_then_unchanged() -> None:
    assert _after_write(300.0, since_written=0.5, expires_in=250.0) == 1.5  # the write's 2 s
    assert _after_write(300.0, since_written=None, expires_in=25.0) == 25.0  # still in flight
    assert _after_write(300.0, since_written=2.5, expires_in=7.5) == 7.5  # the 2 s passed: window
    assert _after_write(300.0, since_written=9.0, expires_in=3.0) == 3.0  # settled, window ends
    assert _after_write(300.0, since_written=None, expires_in=None) == 300.0
    assert _after_write(None, since_written=3.0, expires_in=None) is None  # an error: rate limiter
    assert _after_write(1.0, since_written=0.5, expires_in=None) == 1.0
