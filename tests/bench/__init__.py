"""Benchmarks (`make bench`): each prints raybus beside a floor measured in the same run."""


def pct(values: list[float], q: float) -> float:
    """The q-quantile by rank (nan for no values): what every benchmark's p95/p99 means."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")
