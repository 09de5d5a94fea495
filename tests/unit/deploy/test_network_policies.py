"""deploy/kustomize's NetworkPolicies as `kubectl kustomize` renders them, evaluated with the
NetworkPolicy API's semantics (a Pod selected by no Ingress policy takes anything; a selected one
only what some rule of some selecting policy admits: its ports, and peers by pod and namespace
selector) for the Pods of the install and a few outsiders. The real API server accepts the same
objects (tests/integration/deploy/test_kustomize_dryrun.py); enforcing them takes a CNI, which the
test machines do not have."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.deploy.test_kustomize import TARGETS, render

Doc = dict[str, Any]
NS = "raybus-system"
NAMESPACE_LABELS = {NS: {"kubernetes.io/metadata.name": NS},
                    "monitoring": {"kubernetes.io/metadata.name": "monitoring"},
                    "ray": {"kubernetes.io/metadata.name": "ray"}}


def matches(selector: Doc, labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        has, value = e["key"] in labels, labels.get(e["key"])
        ok = {"In": has and value in e.get("values", []), "NotIn": not has or value not in e.get("values", []),
              "Exists": has, "DoesNotExist": not has}[e["operator"]]
        if not ok:
            return False
    return True


def peer_admits(peer: Doc, policy_ns: str, src_ns: str, src_labels: dict[str, str]) -> bool:
    pods, namespaces = peer.get("podSelector"), peer.get("namespaceSelector")
    if namespaces is None and src_ns != policy_ns:
        return False
    if namespaces is not None and not matches(namespaces, NAMESPACE_LABELS.get(src_ns, {})):
        return False
    return pods is None or matches(pods, src_labels)


def allowed(policies: list[Doc], dst: tuple[str, dict[str, str]], src: tuple[str, dict[str, str]], port: int) -> bool:
    (dst_ns, dst_labels), (src_ns, src_labels) = dst, src
    selecting = [p for p in policies if p["metadata"]["namespace"] == dst_ns
                 and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])
                 and matches(p["spec"]["podSelector"], dst_labels)]
    if not selecting:
        return True
    return any((not rule.get("ports") or any(p.get("port") == port for p in rule["ports"]))
               and (not rule.get("from") or any(peer_admits(peer, dst_ns, src_ns, src_labels) for peer in rule["from"]))
               for policy in selecting for rule in policy["spec"].get("ingress") or [])


def pods(docs: tuple[Doc, ...]) -> dict[str, tuple[str, dict[str, str]]]:
    """The install's Pods by workload name: (namespace, labels of the Pod template)."""
    return {d["metadata"]["name"]: (d["metadata"]["namespace"], d["spec"]["template"]["metadata"]["labels"])
            for d in docs if d["kind"] in ("Deployment", "StatefulSet")}


@pytest.mark.parametrize("target", [*TARGETS, "overlays/namespaced"])
def test_default_deny_with_explicit_allows(target: str) -> None:
    docs = render(target)
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    deny = [p for p in policies if p["spec"]["podSelector"] == {} and not p["spec"].get("ingress")]
    assert [p["metadata"]["namespace"] for p in deny] == [NS]
    pod = pods(docs)
    reconcilers = ("raybus-cluster-reconciler", "raybus-job-reconciler", "raybus-service-reconciler")
    stranger = ("ray", {"app": "user"})
    head = ("ray", {"ray.io/node-type": "head", "ray.io/cluster": "rc"})
    worker = ("ray", {"ray.io/node-type": "worker", "ray.io/cluster": "rc"})
    prometheus = ("monitoring", {"app.kubernetes.io/name": "prometheus"})
    webhook = (NS, {"app.kubernetes.io/name": "raybus-webhook", "app.kubernetes.io/part-of": "raybus"})
    expect = [
        *[(pod["nats"], pod[name], 4222, True) for name in pod if name.startswith("raybus-")],
        (pod["nats"], stranger, 4222, False), (pod["nats"], head, 4222, False),
        (pod["nats"], pod["nats"], 6222, True), (pod["nats"], pod["raybus-watcher"], 6222, False),
        (pod["nats"], pod["nats"], 8222, False), (pod["nats"], stranger, 8222, False),
        *[(pod["redis"], pod[name], 6379, name in reconcilers) for name in pod if name != "redis"],
        (pod["redis"], stranger, 6379, False),
        (pod["raybus-dashboard-poller"], head, 8266, True), (pod["raybus-dashboard-poller"], worker, 8266, False),
        (pod["raybus-dashboard-poller"], stranger, 8266, False), (pod["raybus-dashboard-poller"], head, 9090, False),
        (webhook, stranger, 9443, True), (webhook, stranger, 9090, False), (webhook, prometheus, 9090, True),
        *[(pod[name], prometheus, 9090, True) for name in pod if name.startswith("raybus-")],
        *[(pod[name], stranger, 9090, False) for name in pod if name.startswith("raybus-")],
        *[(pod[name], pod["raybus-watcher"], 9090, False) for name in pod if name.startswith("raybus-")],
        (pod["raybus-watcher"], stranger, 8266, False), (pod["raybus-command-executor"], head, 8266, False),
        # A Pod no allow names (say, one a user starts in raybus's namespace): the default deny.
        ((NS, {"app": "debug"}), stranger, 80, False), ((NS, {"app": "debug"}), pod["raybus-watcher"], 80, False),
    ]
    wrong = [(dst, src, port, want) for dst, src, port, want in expect if allowed(policies, dst, src, port) != want]
    assert wrong == []
    # Outside raybus's namespace the install selects nothing: the user's own Pods are not its business.
    assert allowed(policies, stranger, head, 1234)
