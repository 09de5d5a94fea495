"""`make compose-test`: the stack of compose.local.yaml in containers (podman-compose), then the
sample RayCluster to ready, the sample RayJob (with its ConfigMap) to Complete/SUCCEEDED and the
sample RayService to Ready, as `raybus up --demo` follows them; every container, network and
volume it made is removed at the end, failed or not. Needs `make images` first.

Ports are free ones on 127.0.0.1 (the RAYBUS_*_PORT variables of compose.local.yaml), and the
project name is unique, so a developer's own stack on the default ports is left alone."""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from raybus_sim.apiserver import write_kubeconfig
from raybus_sim.devstack.demo import follow_sample

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "compose.local.yaml"
IMAGES = ("localhost/raybus:latest", "localhost/raybus-dev:latest")
LABEL = "io.podman.compose.project"
# Every service container, by compose service (cluster-reconciler runs 2 replicas).
SERVICES = {"watcher": 1, "command-executor": 1, "cluster-reconciler": 2, "job-reconciler": 1,
            "service-reconciler": 1, "dashboard-poller": 1}


def say(msg: str) -> None:
    print(f"compose-test: {msg}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def podman(*args: str, check: bool = True) -> str:
    """podman's output; stderr too (`podman logs` replays the services' stderr there)."""
    proc = subprocess.run(["podman", *args], check=False,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)}: {proc.returncode}\n{proc.stdout}")
    return proc.stdout


def containers(project: str) -> list[str]:
    out = subprocess.run(["podman", "ps", "-a", "--filter", f"label={LABEL}={project}", "--format",
                          "{{.Names}}"], capture_output=True, text=True, check=True)
    return out.stdout.split()


def wait_for(what: str, ok: object, timeout_s: float) -> None:
    """Poll `ok()` until it is true, or fail after timeout_s."""
    assert callable(ok)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.5)
    raise TimeoutError(f"{what}: not within {timeout_s:.0f} s")


def api_answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/version", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


class AllStarted:
    """Every service replica logged its "started" line (after waiting for NATS/Redis/API);
    every 15 s, which ones have not yet and their last line (a slow start is visible)."""

    def __init__(self, project: str) -> None:
        self.project = project
        self.next_report = time.monotonic() + 15

    def __call__(self) -> bool:
        names = containers(self.project)
        waiting = {}
        for service, replicas in SERVICES.items():
            mine = [n for n in names if n.startswith(f"{self.project}_{service}_")]
            if len(mine) != replicas:
                waiting[service] = f"{len(mine)}/{replicas} containers"
            for name in mine:
                logs = podman("logs", name, check=False)
                if '"started"' not in logs:
                    waiting[name] = (logs.strip().splitlines() or ["(no output yet)"])[-1][:160]
        if waiting and time.monotonic() > self.next_report:
            self.next_report = time.monotonic() + 15
            say(f"not started yet: {waiting}")
        return not waiting


def cleanup(project: str) -> None:
    """Remove what podman-compose made for this project, whatever state it was left in."""
    names = containers(project)
    if names:
        podman("rm", "-f", "-t", "5", *names, check=False)
    for kind in ("pod", "network", "volume"):
        listed = subprocess.run(["podman", kind, "ls", "--filter", f"label={LABEL}={project}",
                                 "--format", "{{.Name}}"], check=False, capture_output=True,
                                text=True).stdout.split()
        if listed:
            podman(kind, "rm", "-f", *listed, check=False)
    left = containers(project) + subprocess.run(
        ["podman", "volume", "ls", "--filter", f"label={LABEL}={project}", "--format", "{{.Name}}"],
        check=False, capture_output=True, text=True).stdout.split()
    say(f"removed project {project}" + (f"; LEFT: {left}" if left else ""))


def dump_logs(project: str, lines: int) -> None:
    for name in containers(project):
        print(f"----- {name} (last {lines} lines)", flush=True)
        out = subprocess.run(["podman", "logs", "--tail", str(lines), name], check=False,
                             capture_output=True, text=True)
        print(out.stdout + out.stderr, flush=True)


def run(project: str, timeout_s: float) -> bool:
    ports = {"RAYBUS_NATS_PORT": free_port(), "RAYBUS_REDIS_PORT": free_port(),
             "RAYBUS_API_PORT": free_port(), "RAYBUS_DASHBOARD_PORT": free_port()}
    env = {**os.environ, **{k: str(v) for k, v in ports.items()}}
    start = time.monotonic()
    up = subprocess.run(["podman-compose", "-p", project, "-f", str(COMPOSE_FILE), "up", "-d",
                         "--no-build"], check=False, cwd=ROOT, env=env, capture_output=True,
                        text=True)
    if up.returncode != 0:
        print(up.stdout[-4000:], up.stderr[-4000:], sep="\n")
        raise RuntimeError(f"podman-compose up: {up.returncode}")
    say(f"{len(containers(project))} containers created in {time.monotonic() - start:.1f} s")
    api = f"http://127.0.0.1:{ports['RAYBUS_API_PORT']}"
    wait_for(f"the local API server at {api}", lambda: api_answers(api), 120)
    wait_for("every service started", AllStarted(project), 300)
    say(f"stack up in {time.monotonic() - start:.1f} s ({len(containers(project))} containers)")
    with tempfile.TemporaryDirectory(prefix="raybus-compose-") as home:
        kubeconfig = write_kubeconfig(Path(home) / "kubeconfig", api)
        ok = follow_sample(kubeconfig=kubeconfig, timeout_s=timeout_s)
    say(f"samples {'passed' if ok else 'FAILED'} after {time.monotonic() - start:.1f} s")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(prog="compose-test", description=__doc__)
    parser.add_argument("--project", default=f"raybusct{os.getpid()}")
    parser.add_argument("--timeout-s", type=float, default=180.0, help="per sample")
    parser.add_argument("--keep", action="store_true", help="leave the stack up (no cleanup)")
    args = parser.parse_args()
    for tool in ("podman", "podman-compose"):
        if shutil.which(tool) is None:
            sys.exit(f"compose-test: {tool} not found: run `make images` first")
    for image in IMAGES:
        if subprocess.run(["podman", "image", "exists", image], check=False).returncode != 0:
            sys.exit(f"compose-test: image {image} missing: run `make images` first")
    start, ok = time.monotonic(), False
    try:
        ok = run(args.project, args.timeout_s)
    except Exception as exc:  # noqa: BLE001 - reported, logs shown, then cleaned up
        say(f"FAILED: {type(exc).__name__}: {exc}")
    finally:
        if not ok:
            dump_logs(args.project, 40)
        if not args.keep:
            cleanup(args.project)
    say(f"{'1 passed, 0 failed' if ok else '0 passed, 1 failed'} in {time.monotonic() - start:.1f} s")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
