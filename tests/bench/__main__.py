"""`make bench`: every benchmark, one after the other, each printing its own ratios."""

from __future__ import annotations

import importlib
import sys

BENCHES = ["tests.bench.bench_bus", "tests.bench.bench_boundary", "tests.bench.bench_clusters",
           "tests.bench.bench_dashboard"]

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
        sys.argv = [name]
        module.main()
