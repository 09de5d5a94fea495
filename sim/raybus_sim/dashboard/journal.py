"""An append-only record of the writes the simulated heads received: job submissions (accepted or
refused), Serve config PUTs and Serve shutdowns, one JSON object a line, in the file named by
`RAYBUS_SIM_DASHBOARD_JOURNAL` (off when unset).

Why a file: the chaos soak restarts kube-sim, and every simulated head with it (fresh sessions,
jobs and apps gone), yet must check every write of the whole run ("every Ray job submitted at most
once per RayJob attempt", "no Serve config PUT for a config that head already had":
tests/chaos/invariants_ray.py). Each line carries the head's session, so a write after a head
restart is told apart from a repeat to the same head. Request counters cannot say this: they hold
no ids or configs and die with the process.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

ENV = "RAYBUS_SIM_DASHBOARD_JOURNAL"


def config_hash(body: Any) -> str:
    """Key order does not make two Serve configs different (Serve compares parsed configs)."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


class Journal:
    def __init__(self, path: str | None = None) -> None:
        self.path = path

    @classmethod
    def from_env(cls) -> Journal:
        return cls(os.environ.get(ENV) or None)

    def write(self, *, namespace: str, cluster: str, session: str, kind: str, **fields: Any) -> None:
        if not self.path:
            return
        line = json.dumps({"t": round(time.time(), 3), "kind": kind, "ns": namespace, "cluster": cluster,
                           "session": session, **fields}, sort_keys=True)
        # One write() of a whole line to an O_APPEND file: lines of restarted processes never mix.
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(line + "\n")


def read(path: str) -> list[dict[str, Any]]:
    """Every record, oldest first; a torn last line (a SIGKILL mid-write) is skipped."""
    rows: list[dict[str, Any]] = []
    if not os.path.exists(path):
        return rows
    with open(path, encoding="utf-8") as src:
        for raw in src:
            try:
                rows.append(json.loads(raw))
            except ValueError:
                continue
    return rows
