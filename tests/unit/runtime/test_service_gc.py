"""The services' GC settings (issue 20): fewer young collections, start-up objects frozen out of
them, and cycles still reclaimed without anyone calling gc.collect. Each case runs in its own
interpreter, so the thresholds it sets do not leak into the test process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

CHILD = textwrap.dedent("""
    import gc, sys, weakref
    import raybus.runtime.process as svc
    from raybus.runtime.settings import RaybusSettings, load

    settings = load(RaybusSettings, "gc-test", sys.argv[1:])
    svc.tune_gc(settings.gc_gen0)
    print(settings.gc_gen0, gc.get_threshold()[0], gc.get_freeze_count() > 0)

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle: reference counting alone never frees it
    gone = weakref.ref(a)
    del a, b
    # CPython counts live container allocations (a freed one counts back): keep them alive.
    kept = [[] for _ in range(3 * max(settings.gc_gen0, 700))]  # no explicit gc.collect
    print(gone() is None)
""")


def _run(*flags: str, env: dict[str, str] | None = None) -> list[str]:
    out = subprocess.run([sys.executable, "-c", CHILD, *flags], cwd=ROOT, capture_output=True,
                         text=True, check=True, timeout=60, env={"PATH": "/usr/bin:/bin", **(env or {})})
    return out.stdout.split()


def test_default_collects_young_objects_less_often_and_freezes_start_up() -> None:
    assert _run() == ["50000", "50000", "True", "True"]


@pytest.mark.parametrize("flags, env", [(["--gc-gen0", "0"], None), ([], {"RAYBUS_GC_GEN0": "0"})])
def test_zero_keeps_cpythons_defaults(flags: list[str], env: dict[str, str] | None) -> None:
    assert _run(*flags, env=env) == ["0", "700", "False", "True"]


def test_env_sets_the_threshold() -> None:
    assert _run(env={"RAYBUS_GC_GEN0": "10000"}) == ["10000", "10000", "True", "True"]
