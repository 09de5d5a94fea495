"""The 2-minute chaos soak (`make chaos-short`, the last step of `make test`): seed 1, every fault kind
at least once (the injector goes through each kind first), every invariant of tests/chaos/soak.py
must hold. About 3 minutes of wall time on the 2-core machine: stack start, 2 minutes of workload
and faults, then convergence and 10 steady seconds."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tests.chaos.soak import FAULTS, run

SEED = 1


async def test_two_minute_soak_holds_every_invariant(tmp_path: Path) -> None:
    args = argparse.Namespace(minutes=2.0, seed=SEED, nats_nodes=3, converge_s=120.0, home=str(tmp_path))
    rc = await run(args)
    summary = json.loads((tmp_path / "soak-result.json").read_text())
    # (the services' logs stay in tmp_path/logs; pytest keeps only the last 3 runs' tmp dirs)
    assert summary["violations"] == [], f"{json.dumps(summary['violations'], indent=2)}\nlogs: {tmp_path / 'logs'}"
    assert rc == 0
    assert set(summary["fault_kinds"]) == set(FAULTS), summary["fault_kinds"]
    assert summary["pod_events"] > 0 and summary["ops"].get("create", 0) >= 3
