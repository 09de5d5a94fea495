"""`python -m cluster_reconciler`: flags/env -> settings -> run until SIGTERM."""

from __future__ import annotations

import os

from cluster_reconciler.app import create_app
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.runtime.service import common_parser, common_settings, serve

SERVICE = "cluster-reconciler"


def main() -> None:
    parser = common_parser(SERVICE)
    parser.add_argument("--feature-gates", default=os.environ.get("RAYBUS_FEATURE_GATES", ""),
                        help="KubeRay --feature-gates syntax, e.g. RayMultiHostIndexing=false")
    parser.add_argument("--batch-scheduler", default=os.environ.get("RAYBUS_BATCH_SCHEDULER", ""),
                        help="KubeRay's --batch-scheduler: volcano, yunikorn or scheduler-plugins")
    args = parser.parse_args()
    settings = common_settings(SERVICE, args)
    # KubeRay reads its knobs (ENABLE_RANDOM_POD_DELETE, ...) from the operator's environment;
    # so do we, once, here at the edge, and pass them into pure decision code.
    operator = OperatorSettings.from_env(os.environ, feature_gates=args.feature_gates,
                                         batch_scheduler=args.batch_scheduler)
    serve(settings, create_app(settings, operator), needs=("nats", "redis"))


if __name__ == "__main__":
    main()
