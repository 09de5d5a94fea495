"""`python -m service_reconciler`: flags/env -> settings -> run until SIGTERM."""

from __future__ import annotations

import os

from raybus.decisions.service.model import ServiceSettings
from raybus.runtime.service import common_parser, common_settings, serve
from service_reconciler.app import create_app

SERVICE = "service-reconciler"


def main() -> None:
    parser = common_parser(SERVICE)
    parser.add_argument("--feature-gates", default=os.environ.get("RAYBUS_FEATURE_GATES", ""),
                        help="KubeRay --feature-gates syntax, e.g. RayServiceIncrementalUpgrade=true")
    args = parser.parse_args()
    settings = common_settings(SERVICE, args)
    # KubeRay's knobs (ENABLE_ZERO_DOWNTIME, ...) come from the operator's environment: read once,
    # here at the edge, and passed into the pure decision code.
    service_settings = ServiceSettings.from_env(os.environ, feature_gates=args.feature_gates)
    serve(settings, create_app(settings, service_settings), needs=("nats", "redis"))


if __name__ == "__main__":
    main()
