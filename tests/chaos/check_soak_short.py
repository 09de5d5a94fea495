"""The 2-minute chaos soak as a pytest test (`make chaos-short`): seed 1, every fault kind at least
once, every invariant of tests/chaos/soak.py must hold.

Named check_*.py, not test_*.py, so `pytest tests` (and `make test`) does not collect it: it takes
about 4-5 minutes of wall time on the 2-core machine (stack start, 2 minutes of faults, then
convergence). Rename it to test_soak_short.py to make it part of `make test`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tests.chaos.soak import FAULTS, run


async def test_two_minute_soak_holds_every_invariant(tmp_path: Path) -> None:
    args = argparse.Namespace(minutes=2.0, seed=1, nats_nodes=3, converge_s=120.0, home=str(tmp_path))
    rc = await run(args)
    summary = json.loads((tmp_path / "soak-result.json").read_text())
    assert summary["violations"] == [], json.dumps(summary["violations"], indent=2)
    assert rc == 0
    assert set(summary["fault_kinds"]) == set(FAULTS), summary["fault_kinds"]
    assert summary["pod_events"] > 0 and summary["ops"].get("create", 0) >= 3
