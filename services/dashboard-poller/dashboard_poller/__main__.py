"""`python -m dashboard_poller`: flags/env -> settings -> run until SIGTERM.

Every PollerSettings field is a flag `--field-name` with the environment default RAYBUS_FIELD_NAME
(e.g. --slow-interval-s / RAYBUS_SLOW_INTERVAL_S, --dashboard-url-template /
RAYBUS_DASHBOARD_URL_TEMPLATE, --proxy-url-template / RAYBUS_PROXY_URL_TEMPLATE).
"""

from __future__ import annotations

import os

from dashboard_poller.app import create_app
from dashboard_poller.settings import SERVICE, PollerSettings
from raybus.runtime.service import CommonSettings, common_parser, common_settings, serve

NOT_FLAGS = {"admission"}  # programmatic only (tests): a deployment always admits


def main() -> None:
    parser = common_parser(SERVICE)
    own = [name for name in PollerSettings.model_fields
           if name not in CommonSettings.model_fields and name not in NOT_FLAGS]
    for name in own:
        field = PollerSettings.model_fields[name]
        default = os.environ.get(f"RAYBUS_{name.upper()}", field.default)
        kind = type(field.default)
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, default=kind(default),
                            help=f"default {field.default!r} (env RAYBUS_{name.upper()})")
    args = parser.parse_args()
    common = common_settings(SERVICE, args)
    settings = PollerSettings(**{**common.model_dump(), **{n: getattr(args, n) for n in own}})
    serve(settings, create_app(settings), needs=("nats", "kube") if settings.admission else ("nats",))


if __name__ == "__main__":
    main()
