"""The service-reconciler's Redis state: deadlines never move, the serve-config cache follows the
decision, in-flight dashboard commands are those of the last step and pair with their results."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from raybus.bus.envelopes import DashboardResultMessage, ObjectKey
from raybus.decisions.dashboard_contract import DashboardCommandResult, PutServeConfig
from raybus.decisions.rayservice.model import ServeConfigCacheEntry, ServiceDecision
from service_reconciler.snapshot import paired_results
from service_reconciler.state import InflightCommand, ServiceState, merge_deadlines

T0 = datetime(2026, 1, 1, tzinfo=UTC)
clusters = st.sampled_from(["c1", "c2", "c3"])
deadlines = st.dictionaries(clusters, st.integers(0, 600).map(lambda s: T0 + timedelta(seconds=s)))
updates = st.dictionaries(clusters, st.none() | st.integers(0, 600).map(lambda s: T0 + timedelta(seconds=s)))


@given(stored=deadlines, rounds=st.lists(updates, max_size=6))
def test_a_stored_deadline_is_never_moved(stored: dict[str, datetime], rounds: list[dict[str, datetime | None]]) -> None:
    current = dict(stored)
    for update in rounds:
        after = merge_deadlines(current, update)
        for cluster, deadline in after.items():
            if cluster in current:
                assert deadline == current[cluster]  # set once, never reset
            else:
                assert update.get(cluster) == deadline
        assert all(cluster not in after for cluster, value in update.items() if value is None)
        current = after


def put(cluster: str) -> PutServeConfig:
    return PutServeConfig(reason="submit", cluster=cluster, config={"applications": []}, config_hash="h")


def test_state_after_a_decision() -> None:
    entry = ServeConfigCacheEntry(config_hash="h", submitted_at=T0)
    old = ServiceState(serve_configs={"gone": entry, "kept": entry}, deadlines={"old": T0},
                       inflight=[InflightCommand(id="b0-0", command=put("kept"))])
    decision = ServiceDecision(serve_config_cache={"gone": None, "new": entry},
                               deletion_deadlines={"old": T0 + timedelta(seconds=9), "other": T0},
                               dashboard_commands=[put("new")])
    new = old.after(decision, command_ids=["b1-0"])
    assert new.serve_configs == {"kept": entry, "new": entry}
    assert new.deadlines == {"old": T0, "other": T0}
    assert new.inflight == [InflightCommand(id="b1-0", command=put("new"))]  # the last step's only
    # Round-trips through its JSON form (what Redis holds).
    assert ServiceState.model_validate_json(new.model_dump_json()) == new


def test_results_pair_with_the_commands_that_asked_for_them() -> None:
    inflight = [InflightCommand(id="b1-0", command=put("a")), InflightCommand(id="b1-1", command=put("b"))]
    result = DashboardResultMessage(
        key=ObjectKey(namespace="default", name="rs"), kind="rayservice", controller="service",
        result=DashboardCommandResult(command_id="b1-1", op="put_serve_config", cluster="b", state="ok"),
        finished_at=T0)
    paired = paired_results(inflight, {"b1-1": result, "other": result})
    assert [(p.command.cluster, p.result.state, p.finished_at) for p in paired] == [("b", "ok", T0)]
