"""controller-runtime's default rate limiter for failed reconciles, per key.

`workqueue.DefaultTypedControllerRateLimiter` = MaxOf(
    ItemExponentialFailureRateLimiter(5 ms, 1000 s),  # per key: 5 ms * 2^failures, capped
    BucketRateLimiter(10 qps, burst 100),             # overall, shared by every key
)
`when(key)` counts one more failure of the key and returns how long to wait before retrying it;
`forget(key)` resets the key after a success (controller-runtime's Queue.Forget). KubeRay's
controllers inherit exactly this: a reconcile that returns an error is requeued with AddRateLimited.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class ItemExponentialFailureRateLimiter(Generic[K]):
    def __init__(self, base_s: float = 0.005, max_s: float = 1000.0) -> None:
        self._base = base_s
        self._max = max_s
        self._failures: dict[K, int] = {}

    def when(self, key: K) -> float:
        exp = self._failures.get(key, 0)
        self._failures[key] = exp + 1
        if exp > 62:  # 2**exp overflows a float's precision long before; the cap applies anyway
            return self._max
        return float(min(self._base * 2.0**exp, self._max))

    def num_requeues(self, key: K) -> int:
        return self._failures.get(key, 0)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)


class BucketRateLimiter:
    """A token bucket (golang.org/x/time/rate.Limiter.Reserve): each call reserves one token and
    returns the wait until that token is available."""

    def __init__(self, qps: float = 10.0, burst: int = 100,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._qps = qps
        self._burst = float(burst)
        self._tokens = float(burst)
        self._clock = clock
        self._last = clock()

    def when(self) -> float:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self._qps


class ControllerRateLimiter(Generic[K]):
    """MaxOf(per-key exponential, overall bucket): controller-runtime's default."""

    def __init__(self, *, base_s: float = 0.005, max_s: float = 1000.0, qps: float = 10.0,
                 burst: int = 100, clock: Callable[[], float] = time.monotonic) -> None:
        self.items: ItemExponentialFailureRateLimiter[K] = ItemExponentialFailureRateLimiter(base_s, max_s)
        self.bucket = BucketRateLimiter(qps, burst, clock)

    def when(self, key: K) -> float:
        return max(self.items.when(key), self.bucket.when())

    def num_requeues(self, key: K) -> int:
        return self.items.num_requeues(key)

    def forget(self, key: K) -> None:
        self.items.forget(key)
