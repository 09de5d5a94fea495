"""The soak's pure invariants (tests/chaos/invariants_ray.py) on recorded-data tables: each must
fire on the breach it names, with the evidence, and stay quiet on the allowed look-alikes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chaos.invariants_ray import job_submissions, ledger_vs_api, leftover_processes, serve_repeats


def sub(cluster: str, sid: str, *, session: str = "s1", status: int = 200, via: str = "http") -> dict[str, Any]:
    return {"kind": "submit", "cluster": cluster, "id": sid, "session": session, "status": status,
            "via": via, "duplicate": status == 500, "t": 1.0}


def put(cluster: str, config: str, *, session: str = "s1", status: int = 200) -> dict[str, Any]:
    return {"kind": "serve_put", "cluster": cluster, "config": config, "session": session, "status": status}


def delete(cluster: str, *, session: str = "s1") -> dict[str, Any]:
    return {"kind": "serve_delete", "cluster": cluster, "session": session, "status": 200}


@pytest.mark.parametrize(("rows", "breaches", "stats"), [
    # one id per attempt's cluster; a retry's new cluster has its own id
    ([sub("wl-j1-a", "j1-x"), sub("wl-j1-b", "j1-y")], [], {"submissions": 2}),
    # the submitter retried and POSTed the id the head already had (refused 500)
    ([sub("wl-j2-a", "j2"), sub("wl-j2-a", "j2", status=500, via="submitter")],
     ["never a resubmission of a job id its head already has"], {"refused_duplicates": 1}),
    # a second id on the same attempt's cluster: two Ray jobs for one attempt
    ([sub("wl-j3-a", "j3-x"), sub("wl-j3-a", "j3-y")], ["one Ray job per RayJob attempt (one job id per cluster)"],
     {"submissions": 2}),
    # the head restarted (new session, jobs lost): the same id again is a recovery, counted
    ([sub("wl-j4-a", "j4"), sub("wl-j4-a", "j4", session="s2")], [], {"resubmitted_after_head_restart": 1}),
    # other prefixes and a refused malformed body (no id) are not the workload's
    ([sub("soak-1", "x"), sub("soak-1", "y"), {"kind": "submit", "cluster": "wl-j5-a", "id": None,
                                                 "status": 500, "duplicate": False}], [], {"submissions": 0}),
])
def test_job_submissions(rows: list[dict[str, Any]], breaches: list[str], stats: dict[str, int]) -> None:
    found, counted = job_submissions(rows, "wl-")
    assert [v.invariant for v in found] == breaches
    assert all(v.evidence for v in found)
    assert {k: counted[k] for k in stats} == stats


@pytest.mark.parametrize(("rows", "breaches"), [
    ([put("wl-s1-a", "c1"), put("wl-s1-a", "c2")], []),  # an in-place update
    ([put("wl-s1-a", "c1"), put("wl-s1-a", "c1")], ["no Serve config PUT for a config that head already had"]),
    ([put("wl-s1-a", "c1"), put("wl-s1-a", "c1", session="s2")], []),  # the head lost its apps
    ([put("wl-s1-a", "c1"), delete("wl-s1-a"), put("wl-s1-a", "c1")], []),  # after a shutdown
    ([put("wl-s1-a", "c1", status=400), put("wl-s1-a", "c1")], []),  # the refused one never applied
    ([put("wl-s1-a", "c1"), put("wl-s1-b", "c1")], []),  # an upgrade's new cluster gets the same config
    ([put("wl-s1-a", "c1"), put("wl-s1-a", "c2"), put("wl-s1-a", "c2")],
     ["no Serve config PUT for a config that head already had"]),
])
def test_serve_repeats(rows: list[dict[str, Any]], breaches: list[str]) -> None:
    found, stats = serve_repeats(rows, "wl-")
    assert [v.invariant for v in found] == breaches
    assert stats["serve_puts"] == sum(1 for r in rows if r.get("status") == 200 and r["kind"] == "serve_put")


def create(name: str, code: int = 201, ok: bool = True) -> dict[str, Any]:
    return {"op": "create", "target": f"Pod/default/{name}", "ok": ok, "code": code}


@pytest.mark.parametrize(("ledger", "pods", "breaches"), [
    ({"b1": [create("p1"), create("p2")]}, {"p1": {"u1"}, "p2": {"u2"}}, []),
    # a takeover after the first executor died mid-batch: 409 in the done record
    ({"b1": [create("p1", 409)]}, {"p1": {"u1"}}, []),
    # the same name created twice by the API server (deleted in between): applied twice
    ({"b1": [create("p1")]}, {"p1": {"u1", "u2"}}, ["no batch applied twice (a Pod name created twice)"]),
    # two batches both created it
    ({"b1": [create("p1")], "b2": [create("p1")]}, {"p1": {"u1"}},
     ["no batch applied twice (two batches created one Pod)"]),
    # a Pod no done batch wrote (a failed create and deletes/patches do not count)
    ({"b1": [create("p1", 500, ok=False), {"op": "delete", "target": "Pod/default/p1", "ok": True, "code": 200}]},
     {"p1": {"u1"}}, ["every Pod the API server created was created by a done ledger batch"]),
])
def test_ledger_vs_api(ledger: dict[str, list[dict[str, Any]]], pods: dict[str, set[str]], breaches: list[str]) -> None:
    found, _ = ledger_vs_api(ledger, pods)
    assert [v.invariant for v in found] == breaches


def test_leftover_processes_by_session_or_home() -> None:
    table = [(10, 10, "nats-server -c /tmp/x/n.conf"), (11, 10, "child"), (12, 12, "python -m other"),
             (13, 13, "redis-server --dir /tmp/home-9/redis"), (14, 14, "bash")]
    found = leftover_processes(table, {10}, "/tmp/home-9")
    assert len(found) == 1 and "10 (sid 10)" in found[0].evidence and "11 (sid 10)" in found[0].evidence
    assert "13 (sid 13)" in found[0].evidence and "12 (sid" not in found[0].evidence
    assert leftover_processes([(12, 12, "python -m other")], {10}, "/tmp/home-9") == []
