"""`python -m watcher`: flags/RAYBUS_* env (common) plus the watcher's own."""

from __future__ import annotations

import os

from raybus.runtime.service import common_parser, common_settings, serve
from watcher.app import SERVICE, WatcherSettings, create_app


def main() -> None:
    parser = common_parser(SERVICE)
    env = os.environ.get
    parser.add_argument("--resync-s", type=float, default=float(env("RAYBUS_RESYNC_S", "600")),
                        help="periodic relist interval (seconds)")
    parser.add_argument("--watch-timeout-s", type=int, default=int(env("RAYBUS_WATCH_TIMEOUT_S", "300")))
    parser.add_argument("--namespace", default=env("RAYBUS_WATCH_NAMESPACE") or None,
                        help="namespaces to watch, comma-separated (KubeRay's --watch-namespace); default all")
    parser.add_argument("--kube-api-qps", type=float, default=float(env("RAYBUS_KUBE_API_QPS", "100")))
    parser.add_argument("--kube-api-burst", type=int, default=int(env("RAYBUS_KUBE_API_BURST", "200")))
    parser.add_argument("--batch-scheduler", default=env("RAYBUS_BATCH_SCHEDULER", ""),
                        help="the operator's --batch-scheduler: also watch its PodGroups")
    parser.add_argument("--discovery-s", type=float, default=float(env("RAYBUS_DISCOVERY_S", "30")),
                        help="how often API discovery is read for optional kinds (Gateway API, PodGroups)")
    parser.add_argument("--publish-window", type=int, default=int(env("RAYBUS_PUBLISH_WINDOW", "128")),
                        help="watch-event publishes in flight per kind; 1: every event of a kind strictly in order")
    parser.add_argument("--bus-state-s", type=float, default=float(env("RAYBUS_BUS_STATE_S", "10")),
                        help="how often the bus's stream/consumer state is read for /metrics (0: never)")
    args = parser.parse_args()
    common = common_settings(SERVICE, args)
    settings = WatcherSettings(**{**common.model_dump(), "resync_s": args.resync_s,
                                  "watch_timeout_s": args.watch_timeout_s, "namespace": args.namespace,
                                  "kube_qps": args.kube_api_qps, "kube_burst": args.kube_api_burst,
                                  "batch_scheduler": args.batch_scheduler, "discovery_s": args.discovery_s,
                                  "publish_window": args.publish_window, "bus_state_s": args.bus_state_s})
    serve(settings, create_app(settings), needs=("nats", "kube"))


if __name__ == "__main__":
    main()
