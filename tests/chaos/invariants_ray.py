"""Pure invariants over what the soak recorded (no I/O; tests/unit/chaos/ runs them on tables).

Inputs: the simulated heads' journal (raybus_sim/dashboard/journal.py: one row per job
submission, Serve config PUT or shutdown, with the head's session), the command ledger's done
batches (KV `raybus-batches`: what the executor applied), the Pods the API server created (from
the recorder's watch: name -> uids), and the processes alive after the stack stopped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from tests.chaos.recorder import Violation

Row = dict[str, Any]


def job_submissions(rows: Iterable[Row], prefix: str) -> tuple[list[Violation], dict[str, int]]:
    """Every Ray job submitted at most once per RayJob attempt.

    A RayJob attempt has one RayCluster of its own (KubeRay v1.7 makes a new cluster, with a new
    job id, per backoffLimit retry), so on one cluster's head:
    - one job id is ever accepted (a second id = a second job for the same attempt);
    - never a POST of an id the head already holds (the head refuses it with 500 "already
      exists"; KubeRay's submitter checks `ray job status` first, raybus reads back a timed-out
      POST instead of posting again);
    - the same id accepted again in a later head session (the head restarted and lost its jobs)
      is a resubmission after a lost head, counted, not a breach.
    """
    accepted: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))  # cluster -> id -> sessions
    out: list[Violation] = []
    stats = {"submissions": 0, "refused_duplicates": 0, "resubmitted_after_head_restart": 0}
    for row in rows:
        if row.get("kind") != "submit" or not str(row.get("cluster", "")).startswith(prefix):
            continue
        cluster, sid = str(row["cluster"]), str(row.get("id"))
        if row.get("status") == 200:
            stats["submissions"] += 1
            accepted[cluster][sid].add(str(row.get("session")))
        elif row.get("duplicate"):
            stats["refused_duplicates"] += 1
            out.append(Violation("never a resubmission of a job id its head already has",
                                 f"{cluster}: POST of {sid} via {row.get('via')} at {row.get('t')} "
                                 f"(session {row.get('session')}) answered 500 already exists"))
    for cluster, ids in sorted(accepted.items()):
        if len(ids) > 1:
            out.append(Violation("one Ray job per RayJob attempt (one job id per cluster)",
                                 f"{cluster}: ids {sorted(ids)}"))
        stats["resubmitted_after_head_restart"] += sum(len(sessions) - 1 for sessions in ids.values())
    return out, stats


def serve_repeats(rows: Iterable[Row], prefix: str) -> tuple[list[Violation], dict[str, int]]:
    """No Serve config PUT to a head for the config that head already had (KubeRay's
    ServeConfigs cache; raybus keeps it in Redis and reads back a PUT that timed out). A head's
    config is the last accepted PUT of its session; a shutdown (DELETE) or a new session (head
    restart: apps lost) clears it, so a PUT then is needed and fine."""
    current: dict[tuple[str, str], str | None] = {}
    out: list[Violation] = []
    stats = {"serve_puts": 0, "serve_puts_after_head_restart": 0}
    for row in rows:
        if not str(row.get("cluster", "")).startswith(prefix):
            continue
        key = (str(row["cluster"]), str(row.get("session")))
        kind = row.get("kind")
        if kind == "serve_delete":
            current[key] = None
        elif kind == "serve_put" and row.get("status") == 200:
            stats["serve_puts"] += 1
            if current.get(key) is not None and current[key] == row.get("config"):
                out.append(Violation("no Serve config PUT for a config that head already had",
                                     f"{key[0]} (session {key[1]}): config {row.get('config')} "
                                     f"apps {row.get('apps')} PUT again at {row.get('t')}"))
            if key not in current and any(k[0] == key[0] for k in current):
                stats["serve_puts_after_head_restart"] += 1
            current[key] = str(row.get("config"))
    return out, stats


def ledger_vs_api(ledger: dict[str, list[dict[str, Any]]], api_pods: dict[str, set[str]]
                  ) -> tuple[list[Violation], dict[str, int]]:
    """No batch applied twice: the executor's ledger (batch id -> results of a done batch) and the
    API server's Pod creations (name -> uids seen in the recorder's watch) agree.

    Pod names are chosen by the reconciler (a hash of its entropy, never generateName), so:
    - a name the API server created twice (two uids) is one create applied twice (after the first
      Pod was deleted): a batch redelivered past the ledger;
    - a name that two batches both created (201) is the same;
    - a Pod in the API server that no done batch created (201, or 409 for a batch taken over from
      a dead executor) was written outside the ledger (e.g. by a revoked batch).
    """
    created_by: dict[str, list[str]] = defaultdict(list)  # pod name -> batches that created it (201)
    touched: set[str] = set()  # pod names any done batch created or found existing (409)
    for batch, results in ledger.items():
        for res in results:
            kind, _, name = str(res.get("target", "")).partition("/")
            name = name.partition("/")[2]
            if res.get("op") != "create" or kind != "Pod" or not res.get("ok"):
                continue
            touched.add(name)
            if res.get("code") == 201:
                created_by[name].append(batch)
    out: list[Violation] = []
    for name, uids in sorted(api_pods.items()):
        if len(uids) > 1:
            out.append(Violation("no batch applied twice (a Pod name created twice)",
                                 f"{name}: uids {sorted(uids)}; created by batches {created_by.get(name, [])}"))
        if name not in touched:
            out.append(Violation("every Pod the API server created was created by a done ledger batch",
                                 f"{name} (uids {sorted(uids)}) is in no done batch's results"))
    for name, batches in sorted(created_by.items()):
        if len(batches) > 1:
            out.append(Violation("no batch applied twice (two batches created one Pod)", f"{name}: {batches}"))
    stats = {"ledger_batches": len(ledger), "ledger_pod_creates": sum(map(len, created_by.values())),
             "api_pods": len(api_pods)}
    return out, stats


def leftover_processes(table: Iterable[tuple[int, int, str]], sessions: set[int], home: str) -> list[Violation]:
    """No process of the run left after the stack stopped: every process the stack started leads
    its own session (start_new_session), so anything still in one of those sessions, or naming the
    run's home directory on its command line, was left behind. `table`: (pid, session id, cmdline)."""
    left = [f"{pid} (sid {sid}): {cmd[:120]}" for pid, sid, cmd in table
            if sid in sessions or (home and home in cmd)]
    return [Violation("no process left running after the soak", "; ".join(left))] if left else []
