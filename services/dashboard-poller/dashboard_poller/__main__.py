"""`python -m dashboard_poller`: flags/env -> settings -> run until SIGTERM.

Every PollerSettings field is a flag `--field-name` with the environment default RAYBUS_FIELD_NAME
(e.g. --slow-interval-s / RAYBUS_SLOW_INTERVAL_S, --dashboard-url-template /
RAYBUS_DASHBOARD_URL_TEMPLATE, --proxy-url-template / RAYBUS_PROXY_URL_TEMPLATE).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from pydantic import ValidationError

from dashboard_poller.app import create_app
from dashboard_poller.settings import SERVICE, PollerSettings
from raybus.runtime.service import CommonSettings, common_parser, common_settings, serve

NOT_FLAGS = {"admission"}  # programmatic only (tests): a deployment always admits


def parse_settings(argv: Sequence[str] | None = None) -> PollerSettings:
    """Flags and RAYBUS_* env -> settings; a bad value exits with one usage error line."""
    parser: argparse.ArgumentParser = common_parser(SERVICE)
    own = [name for name in PollerSettings.model_fields
           if name not in CommonSettings.model_fields and name not in NOT_FLAGS]
    for name in own:
        field = PollerSettings.model_fields[name]
        env = f"RAYBUS_{name.upper()}"
        kind = type(field.default)
        try:
            default = kind(os.environ.get(env, field.default))
        except ValueError:
            parser.error(f"{env}={os.environ[env]!r} is not a {kind.__name__}")
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, default=default,
                            help=f"default {field.default!r} (env {env})")
    args = parser.parse_args(argv)
    common = common_settings(SERVICE, args)
    try:
        return PollerSettings(**{**common.model_dump(), **{n: getattr(args, n) for n in own}})
    except ValidationError as exc:  # one line for every bad value, no traceback
        parser.error("; ".join(f"--{'-'.join(map(str, e['loc'])).replace('_', '-')}: {e['msg']}"
                               for e in exc.errors()))


def main() -> None:
    settings = parse_settings()
    serve(settings, create_app(settings), needs=("nats", "kube") if settings.admission else ("nats",))


if __name__ == "__main__":
    main()
