"""The simulated heads' write journal (raybus_sim/dashboard/journal.py), read by the chaos soak:
accepted and refused submissions with the head's session, across a head restart."""

from __future__ import annotations

from pathlib import Path

from raybus_sim.dashboard.handlers import submit_body
from raybus_sim.dashboard.journal import Journal, config_hash, read
from raybus_sim.dashboard.registry import DashboardRegistry


def test_submissions_are_journaled_with_the_heads_session(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    ticks = iter(range(1000, 2000))
    registry = DashboardRegistry(journal=Journal(str(path)), clock=lambda: float(next(ticks)))
    registry.head_up("default", "rc")
    state = registry.cluster("default", "rc")
    first = state.session
    assert submit_body(state, {"entrypoint": "sleep 1", "submission_id": "j1"}, now=1000.0).status == 200
    assert submit_body(state, {"entrypoint": "sleep 1", "submission_id": "j1"}, now=1000.0, via="submitter").status == 500
    registry.head_down("default", "rc")
    registry.head_up("default", "rc")  # a fresh head: its jobs are gone, a new session
    assert submit_body(state, {"entrypoint": "sleep 1", "submission_id": "j1"}, now=1001.0).status == 200
    rows = read(str(path))
    assert [(r["kind"], r.get("status"), r.get("duplicate"), r.get("via")) for r in rows] == [
        ("head_up", None, None, None), ("submit", 200, False, "http"), ("submit", 500, True, "submitter"),
        ("head_up", None, None, None), ("submit", 200, False, "http")]
    assert rows[1]["session"] == first and rows[4]["session"] != first and rows[4]["id"] == "j1"


def test_off_without_a_path_and_torn_lines_skipped(tmp_path: Path) -> None:
    registry = DashboardRegistry(journal=Journal(None))
    registry.head_up("default", "rc")  # writes nothing, raises nothing
    path = tmp_path / "j.jsonl"
    path.write_text('{"kind": "submit"}\n{"kind": "ser')
    assert read(str(path)) == [{"kind": "submit"}]
    assert config_hash({"a": 1, "b": [2]}) == config_hash({"b": [2], "a": 1}) != config_hash({"a": 2, "b": [2]})
