"""`python -m service_reconciler`: flags/env -> settings -> run until SIGTERM."""

from __future__ import annotations

from raybus.runtime.decision_settings import add_decision_flags, decision_settings
from raybus.runtime.service import common_parser, common_settings, serve
from service_reconciler.app import create_app

SERVICE = "service-reconciler"


def main() -> None:
    parser = common_parser(SERVICE)
    add_decision_flags(parser)
    args = parser.parse_args()
    settings = common_settings(SERVICE, args)
    # KubeRay's knobs (ENABLE_ZERO_DOWNTIME, ...) come from the operator's environment: read once,
    # here at the edge, and passed into the pure decision code.
    serve(settings, create_app(settings, decision_settings(args).service), needs=("nats", "redis"))


if __name__ == "__main__":
    main()
