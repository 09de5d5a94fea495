"""`raybus` command line: `up` (local stack, with raybus-sim installed), `tap` (watch the bus), `render` (preview objects),
`bus-secrets`/`bus-init` (the secured bus's install steps), `webhook-secrets` (the optional
validating webhook's certificate), `config` (a service's effective configuration)."""

from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import PackageNotFoundError, version


def _version() -> str:
    try:
        return version("raybus")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="raybus", description=__doc__)
    parser.add_argument("--version", action="version", version=f"raybus {_version()}",
                        help="print raybus's version and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    from raybus.cli import bus, config, render, tap, webhook
    from raybus.observability.logging import quiet_tls_close_notice

    quiet_tls_close_notice()  # the CLI talks TLS to the bus too (bus-init, tap, raybus up)

    try:  # `raybus up`: the local stack, in the development distribution (raybus-sim) only
        from raybus_sim.devstack import up
    except ImportError:
        pass
    else:
        up.add_parser(sub)
    tap.add_parser(sub)
    render.add_parser(sub)
    bus.add_parser(sub)
    webhook.add_parser(sub)
    config.add_parser(sub)
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
    except KeyboardInterrupt:
        return 130  # Ctrl-C: the shell's code for SIGINT, and no traceback
    except BrokenPipeError:
        # The reader went away (`raybus render f.yaml | head`): stop quietly, and keep Python's
        # own flush at exit from raising again on the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return result


if __name__ == "__main__":
    sys.exit(main())
