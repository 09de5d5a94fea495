"""`python -m cluster_reconciler`: flags/env -> settings -> run until SIGTERM."""

from __future__ import annotations

from cluster_reconciler.app import create_app
from raybus.runtime.decision_settings import add_decision_flags, decision_settings
from raybus.runtime.service import common_parser, common_settings, serve

SERVICE = "cluster-reconciler"


def main() -> None:
    parser = common_parser(SERVICE)
    add_decision_flags(parser)
    args = parser.parse_args()
    settings = common_settings(SERVICE, args)
    # KubeRay reads its knobs (ENABLE_RANDOM_POD_DELETE, ...) from the operator's environment;
    # so do we, once, here at the edge, and pass them into pure decision code.
    serve(settings, create_app(settings, decision_settings(args).operator), needs=("nats", "redis"))


if __name__ == "__main__":
    main()
