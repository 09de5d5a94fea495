"""raybus as separate Pods, installed from deploy/kustomize/overlays/node (server-side apply): the
bus secrets Job, the 3-node NATS StatefulSet (one JetStream cluster over its headless Service),
Redis (TLS, AOF on a claimed volume) and the six services, all Ready with no container restarting."""

from __future__ import annotations

import json

from tests.node.install import NAMESPACE, SERVICES
from tests.node.node import Node


def test_every_raybus_pod_ready_without_restarts(raybus: Node) -> None:
    pods = raybus.get("pods", "-n", NAMESPACE)["items"]
    running = [p for p in pods if p["status"]["phase"] == "Running"]
    names = sorted(p["metadata"]["name"].rsplit("-", 2)[0] if p["metadata"]["name"].startswith("raybus-")
                   else p["metadata"]["name"] for p in running)
    assert names == sorted([*(f"raybus-{s}" for s in SERVICES), "nats-0", "nats-1", "nats-2", "redis-0"]), names
    restarts = {p["metadata"]["name"]: cs["restartCount"] for p in running for cs in p["status"]["containerStatuses"]
                if cs["restartCount"]}
    # NATS may restart once while its peers' names are not yet in DNS; raybus's own Pods must not.
    assert not {n: r for n, r in restarts.items() if not n.startswith("nats-")}, restarts
    assert all(c["ready"] for p in running for c in p["status"]["containerStatuses"])


def test_bus_jobs_completed(raybus: Node) -> None:
    for job in ("raybus-bus-secrets", "raybus-bus-init"):
        got = raybus.get("job", job, "-n", NAMESPACE)
        assert got["status"].get("succeeded") == 1, got["status"]
    secret = raybus.get("secret", "raybus-bus", "-n", NAMESPACE)
    assert {"ca.pem", "server.pem", "redis-users.acl", "nats-auth.conf"} <= set(secret["data"])


def test_nats_is_one_jetstream_cluster_of_three(raybus: Node) -> None:
    # kubectl exec: the API server reaches the kubelet; the monitoring port listens on loopback only.
    out = raybus.kubectl("exec", "-n", NAMESPACE, "nats-0", "--", "wget", "-q", "-O", "-",
                         "http://127.0.0.1:8222/jsz").stdout
    jsz = json.loads(out)
    cluster = jsz["meta_cluster"]
    assert cluster["cluster_size"] == 3, cluster
    assert cluster.get("leader"), cluster


def test_claims_bound_to_node_volumes(raybus: Node) -> None:
    claims = raybus.get("pvc", "-n", NAMESPACE)["items"]
    assert sorted(c["metadata"]["name"] for c in claims) == ["data-nats-0", "data-nats-1", "data-nats-2", "data-redis-0"]
    assert all(c["status"]["phase"] == "Bound" for c in claims)
