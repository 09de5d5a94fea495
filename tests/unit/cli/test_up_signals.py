"""`make run`'s Ctrl-C and SIGTERM stop `raybus up` even while the demo's event loop runs a
coroutine that loses every cancel (Python 3.11's asyncio.wait_for can lose one, CPython gh-86296):
asyncio.run would cancel it first and wait for it forever."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import asyncio
    from raybus_sim.devstack.demo import run_interruptible
    from raybus_sim.devstack.up import stop_on_signals

    async def swallows_cancels() -> None:
        print("ready", flush=True)
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                print("cancel swallowed", flush=True)

    stop_on_signals()
    try:
        run_interruptible(swallows_cancels())
    except KeyboardInterrupt:
        print("interrupted", flush=True)
""")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_loop_that_swallows_cancels(signum: int) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        child.send_signal(signum)
        out, _ = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert out.splitlines()[-1] == "interrupted", out
