"""python -m raybus_sim.apiserver --port N --kubeconfig PATH [--crd-dir D] [--state-file F] [--no-kubelet]"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from pathlib import Path

from .app import DEFAULT_CRD_DIR, start_apiserver, write_kubeconfig


async def _main(args: argparse.Namespace) -> None:
    server = await start_apiserver(args.host, args.port, crd_dir=Path(args.crd_dir), state_file=args.state_file,
                                   kubelet=not args.no_kubelet)
    if args.kubeconfig:
        write_kubeconfig(args.kubeconfig, server.url)
    print(f"raybus-sim apiserver listening on {server.url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop()  # writes the state file, if any


def main() -> None:
    p = argparse.ArgumentParser(prog="raybus_sim.apiserver")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=6443)
    p.add_argument("--kubeconfig", type=Path)
    p.add_argument("--crd-dir", default=str(DEFAULT_CRD_DIR))
    p.add_argument("--state-file", type=Path)
    p.add_argument("--no-kubelet", action="store_true")
    p.add_argument("--log-level", default="WARNING")
    args = p.parse_args()
    logging.basicConfig(level=args.log_level)
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
