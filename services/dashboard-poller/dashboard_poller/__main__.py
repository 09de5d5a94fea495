"""`python -m dashboard_poller`: flags / RAYBUS_* env -> PollerSettings -> run until SIGTERM.

Every PollerSettings field is a flag `--field-name` with the environment variable RAYBUS_FIELD_NAME
(e.g. --slow-interval-s / RAYBUS_SLOW_INTERVAL_S, --dashboard-url-template /
RAYBUS_DASHBOARD_URL_TEMPLATE, --proxy-url-template / RAYBUS_PROXY_URL_TEMPLATE).
"""

from __future__ import annotations

from collections.abc import Sequence

from dashboard_poller.app import create_app
from dashboard_poller.settings import SERVICE, PollerSettings
from raybus.runtime.process import serve
from raybus.runtime.settings import load


def parse_settings(argv: Sequence[str] | None = None) -> PollerSettings:
    """Flags and RAYBUS_* env -> settings; a bad value exits with one usage error line."""
    return load(PollerSettings, SERVICE, argv)


def main() -> None:
    settings = parse_settings()
    serve(settings, create_app(settings), needs=("nats", "kube") if settings.admission else ("nats",))


if __name__ == "__main__":
    main()
