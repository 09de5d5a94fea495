"""`python -m raybus_sim.dashboard --port N [--host H] [--up ns/cluster ...]`."""

from __future__ import annotations

import argparse

from aiohttp import web

from raybus_sim.dashboard import DashboardRegistry, create_dashboard_app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m raybus_sim.dashboard")
    parser.add_argument("--port", type=int, default=8265)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--up",
        action="append",
        default=[],
        metavar="NS/CLUSTER",
        help="start with this head up (repeatable); others via the control API",
    )
    args = parser.parse_args(argv)
    registry = DashboardRegistry()
    for item in args.up:
        namespace, _, cluster = item.partition("/")
        registry.head_up(namespace, cluster)
    web.run_app(create_dashboard_app(registry), host=args.host, port=args.port, print=None)


if __name__ == "__main__":
    main()
