"""`make bench`: every benchmark, one after the other, each printing its own ratios."""

from __future__ import annotations

import importlib
import sys

BENCHES = ["tests.bench.bench_bus", "tests.bench.bench_boundary", "tests.bench.bench_clusters",
           "tests.bench.bench_dashboard", "tests.bench.bench_crds"]

if __name__ == "__main__":
    only = sys.argv[1:]
    for name in BENCHES:
        if only and name.rsplit(".", 1)[-1] not in only:
            continue
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            print(f"== {name}: not available ({exc})")
            continue
        print(f"== {name}")
        # The cluster benchmark's cost curve: 100, 300 and 1,000 RayClusters (issue: scale).
        sys.argv = [name, *(["--clusters", "100,300,1000"] if name.endswith("bench_clusters") else [])]
        module.main()
