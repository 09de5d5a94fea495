"""`python -m dashboard_poller`: flags/env -> settings -> run until SIGTERM."""

from __future__ import annotations

import asyncio
import os

from dashboard_poller.app import create_app
from raybus.adapters.dashboard import IN_CLUSTER_TEMPLATE
from raybus.runtime.service import common_parser, common_settings, run_service

SERVICE = "dashboard-poller"


def main() -> None:
    parser = common_parser(SERVICE)
    parser.add_argument("--dashboard-url-template",
                        default=os.environ.get("RAYBUS_DASHBOARD_URL_TEMPLATE", IN_CLUSTER_TEMPLATE),
                        help="base URL of a cluster's dashboard; {namespace} {cluster} {service}")
    parser.add_argument("--interval", type=float, default=3.0, help="seconds between healthy polls")
    args = parser.parse_args()
    settings = common_settings(SERVICE, args)
    app = create_app(settings, url_template=args.dashboard_url_template, interval_s=args.interval)
    asyncio.run(run_service(settings, app))


if __name__ == "__main__":
    main()
