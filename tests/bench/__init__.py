"""Benchmarks (`make bench`): each prints raybus beside a floor measured in the same run."""


def pct(values: list[float], q: float) -> float:
    """The q-quantile by rank (nan for no values): what every benchmark's p95/p99 means."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def machine() -> str:
    """The CPU model and core count, printed with every table so any two runs can be compared."""
    import os
    from pathlib import Path

    try:
        model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), "unknown CPU")
    except OSError:
        model = "unknown CPU"
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"machine: {model}, {os.cpu_count()} cores ({usable} usable by this process)"
