"""Dashboard poll targets and backoff (pure)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from raybus.decisions.dashboard import next_delay, poll_targets


def _cluster(name: str, *, owner: str | None, ready: bool) -> dict[str, object]:
    meta: dict[str, object] = {"name": name, "namespace": "ns"}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "o"}]
    return {"metadata": meta, "status": {"conditions": [
        {"type": "HeadPodReady", "status": "True" if ready else "False"}]}}


def test_only_ready_clusters_owned_by_jobs_or_services_are_polled() -> None:
    clusters = [_cluster("a", owner="RayJob", ready=True), _cluster("b", owner="RayService", ready=True),
                _cluster("c", owner=None, ready=True), _cluster("d", owner="RayJob", ready=False),
                _cluster("e", owner="Deployment", ready=True)]
    assert poll_targets(clusters) == [("ns", "a"), ("ns", "b")]


@given(st.integers(min_value=0, max_value=100))
def test_backoff_is_monotonic_and_capped(failures: int) -> None:
    delay = next_delay(failures, base_s=3.0, cap_s=60.0)
    assert 3.0 <= delay <= 60.0
    assert next_delay(failures + 1, base_s=3.0, cap_s=60.0) >= delay
    assert next_delay(0, base_s=3.0, cap_s=60.0) == 3.0
