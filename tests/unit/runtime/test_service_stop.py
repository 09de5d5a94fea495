"""A service whose stop hangs still exits after the grace period (a real process, a real SIGTERM)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

CHILD = textwrap.dedent("""
    import asyncio, sys
    import raybus.runtime.process as svc
    from raybus.runtime.settings import CommonSettings

    svc.STOP_GRACE_S = float(sys.argv[1])

    class App:
        async def start(self):
            print("started", flush=True)
        async def stop(self):
            if sys.argv[2] == "hang":
                while True:  # swallows every cancel, like a fetch loop hit by gh-86296
                    try:
                        await asyncio.sleep(3600)
                    except asyncio.CancelledError:
                        pass

    settings = CommonSettings(service="stop-test", log_level="WARNING")
    asyncio.run(svc.run_service(settings, App(), needs=()))  # no NATS here: start at once
""")


def _run(mode: str) -> tuple[int, str]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, "0.5", mode], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "started"
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    return proc.returncode, err


def test_hanging_stop_exits_nonzero_after_the_grace_period() -> None:
    code, err = _run("hang")
    assert code == 1
    assert "stop did not finish" in err


def test_clean_stop_exits_zero() -> None:
    code, err = _run("clean")
    assert code == 0, err
    assert "stop did not finish" not in err
