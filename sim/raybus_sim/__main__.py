"""`python -m raybus_sim`: the local Kubernetes API server (with simulated kubelet) and the
simulated Ray dashboards in one process, dashboards following head pod readiness."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from pathlib import Path

from aiohttp import web

from raybus_sim.apiserver import DEFAULT_CRD_DIR, start_apiserver, write_kubeconfig
from raybus_sim.dashboard import DashboardRegistry, create_dashboard_app
from raybus_sim.heads import HeadDashboardSync


async def _main(args: argparse.Namespace) -> None:
    api = await start_apiserver(args.host, args.port, crd_dir=Path(args.crd_dir),
                                state_file=args.state_file)
    registry = DashboardRegistry()
    api.store.listeners.append(HeadDashboardSync(registry))
    if api.state.kubelet is not None:  # submitter containers talk to these dashboards
        api.state.kubelet.programs.attach(registry)
    runner = web.AppRunner(create_dashboard_app(registry), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, args.host, args.dashboard_port).start()
    if args.kubeconfig:
        write_kubeconfig(args.kubeconfig, api.url)
    print(f"kube-sim ready: api {api.url} dashboards http://{args.host}:{args.dashboard_port}",
          flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()
    await api.stop()  # writes the state file


def main() -> None:
    p = argparse.ArgumentParser(prog="raybus_sim")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=6443)
    p.add_argument("--dashboard-port", type=int, default=8265)
    p.add_argument("--kubeconfig", type=Path)
    p.add_argument("--crd-dir", default=str(DEFAULT_CRD_DIR))
    p.add_argument("--state-file", type=Path)
    p.add_argument("--log-level", default="WARNING")
    args = p.parse_args()
    logging.basicConfig(level=args.log_level)
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
