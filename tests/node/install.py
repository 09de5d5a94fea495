"""raybus installed on the node as a user installs it: `kubectl apply --server-side -k` of an overlay
(deploy/kustomize/overlays/node), then every part Ready."""

from __future__ import annotations

import time
from typing import Any

from tests.node.node import REPO, Node, log

NAMESPACE = "raybus-system"
OVERLAY = REPO / "deploy" / "kustomize" / "overlays" / "node"
SERVICES = ("watcher", "command-executor", "cluster-reconciler", "job-reconciler", "service-reconciler",
            "dashboard-poller")


def wait_until(cond: Any, what: str, timeout: float, interval: float = 2.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = cond()
            if result:
                return result
        except Exception as exc:  # noqa: BLE001 - not yet; reported if it never comes
            last = exc
        time.sleep(interval)
    raise TimeoutError(f"{what}: not within {timeout:.0f}s" + (f" (last error: {last})" if last else ""))


def job_complete(node: Node, name: str, namespace: str = NAMESPACE) -> bool:
    job = node.get("job", name, "-n", namespace)
    return any(c["type"] == "Complete" and c["status"] == "True" for c in job.get("status", {}).get("conditions", []))


def all_ready(node: Node, kind: str, name: str, namespace: str = NAMESPACE) -> bool:
    obj = node.get(kind, name, "-n", namespace)
    want = obj["spec"].get("replicas", 1)
    return bool(obj.get("status", {}).get("readyReplicas", 0) == want
                and obj["status"].get("updatedReplicas", want) == want)


def describe(node: Node) -> str:
    pods = node.kubectl("get", "pods", "-n", NAMESPACE, "-o", "wide", check=False).stdout
    events = node.kubectl("get", "events", "-n", NAMESPACE, "--sort-by=.lastTimestamp", check=False).stdout
    return f"{pods}\n{events[-3000:]}"


def install_raybus(node: Node) -> None:
    started = time.monotonic()
    node.kubectl("apply", "--server-side", "-k", str(OVERLAY), timeout=300)
    steps: list[tuple[str, Any]] = [
        ("Job raybus-bus-secrets Complete", lambda: job_complete(node, "raybus-bus-secrets")),
        ("StatefulSet nats: 3 Ready", lambda: all_ready(node, "statefulset", "nats")),
        ("StatefulSet redis Ready", lambda: all_ready(node, "statefulset", "redis")),
        ("Job raybus-bus-init Complete", lambda: job_complete(node, "raybus-bus-init")),
    ]
    steps += [(f"Deployment raybus-{s} Ready", lambda s=s: all_ready(node, "deployment", f"raybus-{s}"))
              for s in SERVICES]
    for what, cond in steps:
        try:
            wait_until(cond, what, 600)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n{describe(node)}") from None
        log(f"{what} ({time.monotonic() - started:.0f} s)")
