"""KubeClient._call's Retry-After loop (client-go's checkWait, maxRetries 10): the first attempt
runs outside tenacity (issue 20), the retries inside it; together exactly 1 + 10 attempts, each
after the wait the server asked for."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes_asyncio import client as kclient

from raybus.adapters import kube
from raybus.adapters.kube import MAX_RETRIES, KubeClient, KubeError


class _Throttled(KubeClient):
    """Answers 429 + Retry-After for the first `throttled` attempts, then an object."""

    def __init__(self, throttled: int, error_code: int = 429) -> None:
        super().__init__(kclient.ApiClient())
        self.throttled, self.code, self.attempts = throttled, error_code, 0

    async def _call_once(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        self.attempts += 1
        if self.attempts <= self.throttled:
            error = KubeError(self.code, "TooManyRequests", "slow down")
            if self.code == 429:
                raise kube._RetryAfter(0.25, error)
            raise error
        return {"attempt": self.attempts}


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    return slept


@pytest.mark.parametrize("throttled", [0, 1, 2, MAX_RETRIES])
async def test_a_throttled_call_is_sent_again_after_each_wait(throttled: int, waits: list[float]) -> None:
    client = _Throttled(throttled)
    assert await client.get(kube.resource_for("v1", "Pod"), namespace="ns", name="p") == {
        "attempt": throttled + 1}
    assert client.attempts == throttled + 1
    assert [w for w in waits if w] == [0.25] * throttled


async def test_after_ten_retries_the_429_is_the_callers(waits: list[float]) -> None:
    client = _Throttled(throttled=1000)
    with pytest.raises(KubeError) as err:
        await client.get(kube.resource_for("v1", "Pod"), namespace="ns", name="p")
    assert err.value.code == 429
    assert client.attempts == 1 + MAX_RETRIES


async def test_an_error_without_retry_after_is_not_sent_again(waits: list[float]) -> None:
    client = _Throttled(throttled=5, error_code=500)
    with pytest.raises(KubeError):
        await client.get(kube.resource_for("v1", "Pod"), namespace="ns", name="p")
    assert client.attempts == 1 and not [w for w in waits if w]
