"""The local stack's processes: readiness comes from the current run, nothing outlives `raybus up`,
and every service exits within its stop grace whatever NATS is doing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from raybus.runtime.process import STOP_GRACE_S
from raybus_sim.devstack.stack import LocalStack, Proc, wait_for_line
from raybus_sim.testing.servers import die_with_parent


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie child of ours has exited; it only waits to be reaped.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] == "Z"
    except FileNotFoundError:
        return True


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if not _gone(p)]
        time.sleep(0.1)
    return alive


def test_a_ready_line_from_an_earlier_run_does_not_count(tmp_path: Path) -> None:
    log = tmp_path / "svc.log"
    log.write_text('{"message": "started"}\n')  # the previous run's line, append-mode log
    with log.open("ab") as out:
        popen = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], stdout=out,
                                 preexec_fn=die_with_parent())  # noqa: PLW1509 - prctl only, no locks
    proc = Proc(name="svc", argv=[], popen=popen, log=log, log_offset=log.stat().st_size)
    try:
        with pytest.raises(TimeoutError):
            wait_for_line(proc, '"started"', timeout=1.0)
        with log.open("a") as f:
            f.write('{"message": "started"}\n')  # this run's line
        wait_for_line(proc, '"started"', timeout=5.0)
    finally:
        popen.kill()
        popen.wait()


def test_stack_twice_in_one_home_then_services_exit_after_nats_is_gone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    services = ["watcher", "command_executor", "cluster_reconciler", "dashboard_poller"]
    first = LocalStack(home=home, services=services)
    first.start()
    first.stop()
    second = LocalStack(home=home, services=services)  # Ctrl-C, make run again
    try:
        second.start()
        for proc in second.procs:  # ready by this run's own lines
            assert proc.popen.poll() is None, proc.name
            assert proc.log_offset > 0, proc.name
        assert second.nats is not None
        second.nats.stop(kill=True)  # the NATS server goes away: clients reconnect forever
        pids = {p.name: p.popen.pid for p in second.procs if p.name != "kube-sim"}
        for proc in second.procs:
            if proc.name != "kube-sim":
                proc.popen.send_signal(signal.SIGTERM)
        started = time.monotonic()
        for proc in second.procs:
            if proc.name != "kube-sim":
                proc.popen.wait(timeout=STOP_GRACE_S + 5)
        assert time.monotonic() - started <= STOP_GRACE_S + 5, pids
    finally:
        second.stop()


def test_children_do_not_outlive_a_killed_raybus_up(tmp_path: Path) -> None:
    raybus = Path(sys.executable).parent / "raybus"
    up = subprocess.Popen([str(raybus), "up", "--home", str(tmp_path / "home")], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    children: list[int] = []
    try:
        assert up.stdout is not None
        deadline = time.monotonic() + 90
        for line in up.stdout:
            if "raybus ready" in line:
                break
            assert time.monotonic() < deadline, "raybus up not ready"
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(up.pid)], capture_output=True,
                             text=True, check=False).stdout
        children = [int(p) for p in out.split()]
        assert len(children) >= 8  # nats, redis, kube-sim and every service
        up.kill()  # SIGKILL: no chance to stop anything itself
        up.wait()
        alive = _wait_gone(children, timeout=STOP_GRACE_S + 10)
        assert alive == [], f"still running after raybus up was killed: {alive}"
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if up.poll() is None:
            up.kill()


def _read_until(up: subprocess.Popen[str], needle: str, timeout: float, seen: list[str]) -> None:
    assert up.stdout is not None
    deadline = time.monotonic() + timeout
    for line in up.stdout:  # raybus up prints one line at least every demo transition
        seen.append(line)
        if needle in line:
            return
        assert time.monotonic() < deadline, f"no {needle!r} after {timeout}s:\n{''.join(seen)}"
    raise AssertionError(f"raybus up exited before {needle!r}:\n{''.join(seen)}")


def _errors(log: Path, offset: int) -> list[str]:
    with log.open("rb") as f:
        f.seek(offset)
        return [line for line in f.read().decode(errors="replace").splitlines() if '"level": "ERROR"' in line]


@pytest.mark.long  # about two minutes: every sample through the demo, twice
def test_make_run_interrupted_during_the_demo_runs_all_samples_again(tmp_path: Path) -> None:
    """Ctrl-C while the sample RayJob runs, then `make run` again (same home): a terminal's Ctrl-C
    (SIGINT to the whole process group) stops the services before NATS, without errors, and the
    second run starts the RayJob the restart failed afresh, then applies the RayService."""
    home = tmp_path / "home"
    raybus = [str(Path(sys.executable).parent / "raybus"), "up", "--home", str(home), "--demo"]
    first = subprocess.Popen(raybus, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)  # its own process group, as `make run` in a terminal
    seen: list[str] = []
    try:
        _read_until(first, "jobDeploymentStatus=Running", 180, seen)
        os.killpg(first.pid, signal.SIGINT)  # what the terminal does: every process of the group
        try:
            out, _ = first.communicate(timeout=3 * STOP_GRACE_S + 30)
        except subprocess.TimeoutExpired as exc:
            told = exc.output.decode(errors="replace") if isinstance(exc.output, bytes) else exc.output or ""
            raise AssertionError(f"raybus up still running {exc.timeout:.0f}s after Ctrl-C:\n"
                                 f"{''.join(seen)}{told}") from None
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    assert "stopped" in out, "".join(seen) + out
    # NATS was stopped by `raybus up` (SIGTERM) after the services, not by the terminal's SIGINT
    nats_log = (home / "nats" / "server.log").read_text()
    assert 'Trapped "terminated" signal' in nats_log and 'Trapped "interrupt"' not in nats_log
    logs = sorted((home / "logs").glob("*.log"))
    assert {log.name for log in logs} >= {"watcher.log", "job-reconciler.log", "dashboard-poller.log"}
    for log in logs:
        assert _errors(log, 0) == [], log.name
    offsets = {log: log.stat().st_size for log in logs}

    second = subprocess.Popen([*raybus, "--exit-after-demo"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = second.communicate(timeout=360)
    finally:
        if second.poll() is None:
            os.killpg(second.pid, signal.SIGKILL)
    assert second.returncode == 0, out
    # Usually the interrupted RayJob is started afresh; on a fast (or slow) machine its short job can
    # reach Complete between the "Running" line and the services' stop, and a RayJob that
    # succeeded is kept. Either way every sample must work on the second run.
    restarted = "RayJob default/rayjob-sample from an earlier run did not finish" in out
    kept = "demo: RayJob default/rayjob-sample from ray-job.sample.yaml already exists" in out
    assert restarted or kept, out
    assert "demo: RayJob default/rayjob-sample completed" in out, out
    assert "demo: RayService default/rayservice-sample is ready" in out, out
    for log, offset in offsets.items():  # a clean stop of the second run too
        assert _errors(log, offset) == [], log.name


def test_the_poller_runs_with_the_users_head_templates_and_a_flag_wins(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`raybus up` against real Ray heads: the dashboard-poller process gets the user's
    RAYBUS_*_URL_TEMPLATE, not the simulator's, and a flag (extra_env) beats the environment."""
    monkeypatch.setenv("RAYBUS_DASHBOARD_URL_TEMPLATE", "http://127.0.0.1:8265")
    monkeypatch.setenv("RAYBUS_PROXY_URL_TEMPLATE", "http://env-proxy:8000")
    stack = LocalStack(home=tmp_path / "home", services=["dashboard_poller"],
                       extra_env={"RAYBUS_PROXY_URL_TEMPLATE": "http://flag-proxy:8000"})
    try:
        stack.start()
        poller = stack.proc("dashboard-poller")
        environ = dict(item.split("=", 1) for item in
                       Path(f"/proc/{poller.popen.pid}/environ").read_text().split("\0") if "=" in item)
        assert environ["RAYBUS_DASHBOARD_URL_TEMPLATE"] == "http://127.0.0.1:8265"
        assert environ["RAYBUS_PROXY_URL_TEMPLATE"] == "http://flag-proxy:8000"
        assert stack.nats is not None and environ["RAYBUS_NATS_URL"] == stack.nats.url
        assert "RAYBUS_DASHBOARD_URL_TEMPLATE=http://127.0.0.1:8265" in (stack.home / "env").read_text()
    finally:
        stack.stop()
