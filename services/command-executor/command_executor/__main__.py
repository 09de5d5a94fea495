"""`python -m command_executor`: flags/RAYBUS_* env (common) plus the executor's own."""

from __future__ import annotations

import os

from command_executor.app import SERVICE, ExecutorSettings, create_app
from raybus.runtime.decision_settings import add_decision_flags, decision_settings
from raybus.runtime.service import common_parser, common_settings, serve


def main() -> None:
    parser = common_parser(SERVICE)
    env = os.environ.get
    parser.add_argument("--kube-api-qps", type=float, default=float(env("RAYBUS_KUBE_API_QPS", "100")))
    parser.add_argument("--kube-api-burst", type=int, default=int(env("RAYBUS_KUBE_API_BURST", "200")))
    parser.add_argument("--concurrency", type=int, default=int(env("RAYBUS_EXECUTOR_CONCURRENCY", "32")))
    # Executor admission: how long a batch whose Ray object the watch has not seen is retried.
    parser.add_argument("--admission-wait-s", type=float, default=float(env("RAYBUS_ADMISSION_WAIT_S", "30")))
    parser.add_argument("--watch-namespace", default=env("RAYBUS_WATCH_NAMESPACE") or None,
                        help="KubeRay's watchNamespace, comma-separated: the namespaces whose objects are admitted")
    add_decision_flags(parser)
    args = parser.parse_args()
    common = common_settings(SERVICE, args)
    settings = ExecutorSettings(**{**common.model_dump(), "kube_qps": args.kube_api_qps,
                                   "kube_burst": args.kube_api_burst, "concurrency": args.concurrency,
                                   "admission_wait_s": args.admission_wait_s,
                                   "decision": decision_settings(args), "watch_namespace": args.watch_namespace})
    serve(settings, create_app(settings), needs=("nats", "kube"))


if __name__ == "__main__":
    main()
