"""The NetworkPolicy controller (gate RayClusterNetworkPolicy; issue 13 item 4), mirroring
KubeRay's networkpolicy_controller_unit_test.go behaviours."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from raybus.api.raycluster import RayCluster
from raybus.api.settings import FeatureGates
from raybus.decisions.cluster.network_policy import build_network_policies, reconcile_network_policies
from raybus.decisions.cluster.reconcile import ClusterSnapshot, reconcile_cluster
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import CreateObject, DeleteObject, PatchObject
from tests.conftest import SAMPLES
from tests.unit.decisions.cluster.test_reconcile_helpers import apply, later, make_cluster, worker_group

GATED = OperatorSettings(feature_gates=FeatureGates(ray_cluster_network_policy=True))
DNS = {"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}],
       "ports": [{"port": 53, "protocol": "UDP"}]}
SAME = {"podSelector": {"matchLabels": {"ray.io/cluster": "demo"}}}


def cluster(policy: dict[str, Any] | None, **kw: Any) -> RayCluster:
    groups = kw.pop("groups", [worker_group("a"), worker_group("b")])
    return make_cluster(groups=groups, **({"networkPolicy": policy} if policy is not None else {}), **kw)


def by_name(policies: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in policies}


@pytest.mark.parametrize(
    ("mode", "types", "ingress", "egress"),
    [(None, ["Ingress", "Egress"], True, True), ("DenyAll", ["Ingress", "Egress"], True, True),
     ("DenyAllIngress", ["Ingress"], True, False), ("DenyAllEgress", ["Egress"], False, True)],
)
def test_mode_decides_policy_types(mode: str | None, types: list[str], ingress: bool, egress: bool) -> None:
    policies = build_network_policies(cluster({"mode": mode} if mode else {}))
    assert [p["metadata"]["name"] for p in policies] == ["demo-head", "demo-workers-a", "demo-workers-b"]
    for p in policies:
        assert p["spec"]["policyTypes"] == types
        assert ("ingress" in p["spec"]) == ingress and ("egress" in p["spec"]) == egress
        if ingress:
            assert p["spec"]["ingress"][0] == {"from": [SAME]}
        if egress:
            assert p["spec"]["egress"][0] == {"to": [SAME]}
        assert p["metadata"]["labels"] == {"ray.io/cluster": "demo", "app.kubernetes.io/name": "kuberay",
                                           "app.kubernetes.io/created-by": "kuberay-operator"}
        assert p["metadata"]["ownerReferences"][0]["controller"] is True


def test_selectors_and_group_rules_replace_worker_rules() -> None:
    custom = {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"port": 443}]}
    policies = by_name(build_network_policies(cluster({
        "head": {"egressRules": [DNS]}, "worker": {"egressRules": [DNS]},
        "workerGroups": [{"groupName": "b", "egressRules": [custom]}]})))
    head, a, b = policies["demo-head"], policies["demo-workers-a"], policies["demo-workers-b"]
    assert head["spec"]["podSelector"] == {"matchLabels": {"ray.io/cluster": "demo", "ray.io/node-type": "head"}}
    assert a["spec"]["podSelector"]["matchLabels"] == {"ray.io/cluster": "demo", "ray.io/node-type": "worker",
                                                        "ray.io/group": "a"}
    assert head["spec"]["egress"][1:] == [DNS] and a["spec"]["egress"][1:] == [DNS]
    assert b["spec"]["egress"][1:] == [custom]  # replaces, does not merge with, the worker rules


def test_k8s_job_mode_ray_job_submitter_may_reach_the_dashboard() -> None:
    rc = cluster({})
    body = rc.to_manifest()
    body["metadata"]["labels"] = {"ray.io/job-submission-mode": "K8sJobMode"}
    body["metadata"]["ownerReferences"] = [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "job1",
                                            "uid": "j", "controller": True}]
    body["spec"]["headGroupSpec"]["rayStartParams"] = {"dashboard-port": "9000"}
    head = build_network_policies(RayCluster.model_validate(body))[0]
    assert head["spec"]["ingress"][1] == {
        "from": [{"podSelector": {"matchLabels": {"ray.io/originated-from-cr-name": "job1",
                                                  "ray.io/originated-from-crd": "RayJob"}}}],
        "ports": [{"protocol": "TCP", "port": 9000}]}
    body["metadata"]["labels"] = {"ray.io/job-submission-mode": "SidecarMode"}
    assert len(build_network_policies(RayCluster.model_validate(body))[0]["spec"]["ingress"]) == 1


def _as_stored(policy: dict[str, Any]) -> dict[str, Any]:
    """What the API server returns: ports' protocol defaulted to TCP."""
    stored = copy.deepcopy(policy)
    stored["metadata"]["uid"] = "np-" + stored["metadata"]["name"]
    for key in ("ingress", "egress"):
        for rule in stored["spec"].get(key) or []:
            for port in rule.get("ports") or []:
                port.setdefault("protocol", "TCP")
    return stored


def test_in_sync_policies_are_left_alone_even_with_defaulted_protocols() -> None:
    rc = cluster({"worker": {"egressRules": [{"to": [SAME], "ports": [{"port": 443}]}]}})
    existing = [_as_stored(p) for p in build_network_policies(rc)]
    assert reconcile_network_policies(rc, existing=existing, settings=GATED) == []


def test_drift_is_patched_and_stale_groups_deleted() -> None:
    rc = cluster({"mode": "DenyAllIngress"}, groups=[worker_group("a")])
    old = cluster({"mode": "DenyAll"})
    existing = [_as_stored(p) for p in build_network_policies(old)]
    commands = reconcile_network_policies(rc, existing=existing, settings=GATED)
    patched = {c.target.name: c for c in commands if isinstance(c, PatchObject)}
    assert set(patched) == {"demo-head", "demo-workers-a"}
    assert patched["demo-head"].merge_patch["spec"]["egress"] is None  # removed, not merged
    assert patched["demo-head"].merge_patch["spec"]["policyTypes"] == ["Ingress"]
    assert patched["demo-head"].event_reason == "UpdatedNetworkPolicy"
    (delete,) = [c for c in commands if isinstance(c, DeleteObject)]
    assert delete.target.name == "demo-workers-b" and delete.target.uid == "np-demo-workers-b"


def test_removing_network_policy_deletes_owned_ones_only() -> None:
    existing = [_as_stored(p) for p in build_network_policies(cluster({}))]
    foreign = copy.deepcopy(existing[0])
    foreign["metadata"].update(name="user-policy", ownerReferences=[])
    commands = reconcile_network_policies(cluster(None), existing=[*existing, foreign], settings=GATED)
    assert sorted(c.target.name for c in commands if isinstance(c, DeleteObject)) == [
        "demo-head", "demo-workers-a", "demo-workers-b"]


def test_gate_off_no_controller() -> None:
    existing = [_as_stored(p) for p in build_network_policies(cluster({}))]
    assert reconcile_network_policies(cluster(None), existing=existing, settings=OperatorSettings()) == []


def test_sample_deny_all_in_reconcile_and_failures_never_touch_the_status() -> None:
    body = yaml.safe_load((SAMPLES / "ray-cluster.network-policy-deny-all.yaml").read_text())
    body["metadata"].update(namespace="ns", uid="u1", generation=1, resourceVersion="1")
    rc = RayCluster.model_validate(body)
    d = reconcile_cluster(ClusterSnapshot(cluster=rc), settings=GATED, now=later(0), entropy="e")
    made = [c.object["metadata"]["name"] for c in d.commands
            if isinstance(c, CreateObject) and c.object["kind"] == "NetworkPolicy"]
    assert made == ["raycluster-deny-all-head", "raycluster-deny-all-workers-workergroup"]
    kinds = [c.object["kind"] for c in d.commands if isinstance(c, CreateObject)]
    assert kinds[-2:] == ["NetworkPolicy", "NetworkPolicy"]  # after the Pods: a failure cannot stop them
    snapshot = apply(ClusterSnapshot(cluster=rc), d)
    assert len(snapshot.network_policies) == 2
    d2 = reconcile_cluster(snapshot, settings=GATED, now=later(5), entropy="e")
    assert not [c for c in d2.commands if isinstance(c, CreateObject) and c.object["kind"] == "NetworkPolicy"]


@settings(max_examples=40, deadline=None)
@given(mode=st.sampled_from([None, "DenyAll", "DenyAllIngress", "DenyAllEgress"]),
       groups=st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True, max_size=4),
       previous=st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True, max_size=4))
def test_reconcile_converges_in_one_round(mode: str | None, groups: list[str], previous: list[str]) -> None:
    """Whatever policies exist from an earlier spec, one round's commands leave exactly the desired ones."""
    policy = {"mode": mode} if mode else {}
    rc = cluster(policy, groups=[worker_group(g) for g in groups])
    store = {p["metadata"]["name"]: _as_stored(p)
             for p in build_network_policies(cluster({"mode": "DenyAllEgress"},
                                                     groups=[worker_group(g) for g in previous]))}
    for cmd in reconcile_network_policies(rc, existing=list(store.values()), settings=GATED):
        if isinstance(cmd, CreateObject):
            store[cmd.object["metadata"]["name"]] = _as_stored(cmd.object)
        elif isinstance(cmd, DeleteObject):
            del store[cmd.target.name]
        elif isinstance(cmd, PatchObject):
            from tests.unit.decisions.cluster.test_reconcile_helpers import _merge

            store[cmd.target.name] = _merge(store[cmd.target.name], cmd.merge_patch)
    want = {p["metadata"]["name"]: p for p in build_network_policies(rc)}
    assert set(store) == set(want)
    assert reconcile_network_policies(rc, existing=list(store.values()), settings=GATED) == []
