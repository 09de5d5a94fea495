"""Executor admission refuses forged batches: a table of each kind of forgery (with its reason),
and a property: any forging mutation of any command of a real batch is refused."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raybus.api.raycluster import RayCluster
from raybus.decisions import admission as a
from raybus.decisions.cluster.reconcile import ClusterSnapshot, reconcile_cluster
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import (
    Command,
    CreateObject,
    DeleteObject,
    ObjectRef,
    PatchObject,
    RecordEvent,
    UpdateStatus,
)
from tests.unit.decisions.test_admission import CLUSTERS, T0, verdict, view

Json = dict[str, Any]
NS = "team-a"
CLUSTER: Json = {
    "apiVersion": "ray.io/v1", "kind": "RayCluster",
    "metadata": {"name": "rc", "namespace": NS, "uid": "uid-rc", "resourceVersion": "3", "generation": 1},
    "spec": {"enableInTreeAutoscaling": True,
             "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                 {"name": "ray-head", "image": "rayproject/ray:2.52.0"}]}}},
             "workerGroupSpecs": [{"groupName": "w", "replicas": 1, "minReplicas": 0, "maxReplicas": 3,
                                   "rayStartParams": {}, "template": {"spec": {"containers": [
                                       {"name": "ray-worker", "image": "rayproject/ray:2.52.0"}]}}}]}}
JOB: Json = {"apiVersion": "ray.io/v1", "kind": "RayJob",
             "metadata": {"name": "rj", "namespace": NS, "uid": "uid-rj"}, "spec": {}}
SERVICE: Json = {"apiVersion": "ray.io/v1", "kind": "RayService",
                 "metadata": {"name": "rs", "namespace": NS, "uid": "uid-rs"}, "spec": {}}
OTHER_CLUSTER: Json = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
                       "metadata": {"name": "victim", "namespace": NS, "uid": "uid-victim"}, "spec": {}}
OWNED_BY_SERVICE: Json = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {
    "name": "rs-abcde", "namespace": NS, "uid": "uid-rs-abcde", "ownerReferences": [
        {"apiVersion": "ray.io/v1", "kind": "RayService", "name": "rs", "uid": "uid-rs", "controller": True}]},
    "spec": {}}
WORLD = view(CLUSTER, JOB, SERVICE, OTHER_CLUSTER, OWNED_BY_SERVICE)


def owner(kind: str = "RayCluster", name: str = "rc", uid: str = "uid-rc") -> Json:
    return {"apiVersion": "ray.io/v1", "kind": kind, "name": name, "uid": uid, "controller": True}


def pod(*, namespace: str = NS, owners: list[Json] | None = None, labels: Json | None = None,
        privileged: bool = False) -> Json:
    container: Json = {"name": "x", "image": "evil"}
    if privileged:
        container["securityContext"] = {"privileged": True}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": namespace, "labels": {"ray.io/cluster": "rc"} if labels is None
                         else labels, "ownerReferences": [owner()] if owners is None else owners},
            "spec": {"containers": [container], "hostPID": privileged}}


def create(obj: Json, **kw: Any) -> CreateObject:
    return CreateObject(reason="forged", object=obj, **kw)


def ref(kind: str, name: str, namespace: str = NS, api_version: str = "v1", uid: str | None = None) -> ObjectRef:
    return ObjectRef(api_version=api_version, kind=kind, namespace=namespace, name=name, uid=uid)


RULES = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
         {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]},
         {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get", "patch"]}]
RBAC = "rbac.authorization.k8s.io/v1"


def role(rules: list[Json], name: str = "rc") -> Json:
    return {"apiVersion": RBAC, "kind": "Role", "rules": rules,
            "metadata": {"name": name, "namespace": NS, "ownerReferences": [owner()]}}


def binding(*, sa: str = "rc", role_kind: str = "Role", role_name: str = "rc") -> Json:
    return {"apiVersion": RBAC, "kind": "RoleBinding",
            "metadata": {"name": "rc", "namespace": NS, "ownerReferences": [owner()]},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": NS}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name}}


def serve_svc(cluster: str, uid: str) -> Json:
    return {"apiVersion": "v1", "kind": "Service", "spec": {},
            "metadata": {"name": f"{cluster}-serve-svc", "namespace": NS,
                         "ownerReferences": [owner("RayCluster", cluster, uid)]}}


# (id, controller, primary, commands, reason)
CASES: list[tuple[str, str, Json, list[Command], str]] = [
    ("pod-in-another-namespace", "cluster", CLUSTER, [create(pod(namespace="kube-system"))], a.NAMESPACE),
    ("privileged-pod-without-ray-owner", "cluster", CLUSTER, [create(pod(owners=[], privileged=True))], a.OWNER),
    ("pod-owned-by-a-dead-incarnation", "cluster", CLUSTER, [create(pod(owners=[owner(uid="uid-old")]))], a.OWNER),
    ("pod-of-another-cluster", "cluster", CLUSTER, [create(pod(labels={"ray.io/cluster": "victim"}))], a.POD_LABEL),
    ("clusterrole", "cluster", CLUSTER, [create({"apiVersion": RBAC, "kind": "ClusterRole", "rules": RULES,
                                                "metadata": {"name": "rc", "ownerReferences": [owner()]}})], a.KIND),
    ("clusterrolebinding", "cluster", CLUSTER, [create({**binding(), "kind": "ClusterRoleBinding"})], a.KIND),
    ("role-with-extra-rules", "cluster", CLUSTER,
     [create(role([*RULES, {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]))], a.RBAC_RULES),
    ("role-with-wider-verbs", "cluster", CLUSTER,
     [create(role([{**RULES[0], "verbs": ["*"]}, *RULES[1:]]))], a.RBAC_RULES),
    ("role-under-another-name", "cluster", CLUSTER, [create(role(RULES, name="admin"))], a.RBAC_RULES),
    ("rolebinding-to-another-account", "cluster", CLUSTER, [create(binding(sa="default"))], a.RBAC_RULES),
    ("rolebinding-to-cluster-admin", "cluster", CLUSTER,
     [create(binding(role_kind="ClusterRole", role_name="cluster-admin"))], a.RBAC_RULES),
    ("secret-with-values", "cluster", CLUSTER, [create({"apiVersion": "v1", "kind": "Secret", "data": {"k": "dg=="},
                                                       "metadata": {"name": "rc", "namespace": NS,
                                                                    "ownerReferences": [owner()]}})], a.MALFORMED),
    ("service-account-token-secret", "cluster", CLUSTER,
     [create({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
              "metadata": {"name": "rc", "namespace": NS, "ownerReferences": [owner()]}})], a.MALFORMED),
    ("status-of-a-foreign-object", "cluster", CLUSTER,
     [UpdateStatus(reason="x", target=ref("RayCluster", "victim", api_version="ray.io/v1"), status={})],
     a.FOREIGN_STATUS),
    ("status-of-a-same-named-rayjob", "cluster", CLUSTER,
     [UpdateStatus(reason="x", target=ref("RayJob", "rc", api_version="ray.io/v1"), status={})], a.FOREIGN_STATUS),
    ("event-on-a-foreign-object", "job", JOB, [RecordEvent(reason="x", target=ref("Pod", "p"), event_reason="X",
                                                           message="m")], a.FOREIGN_STATUS),
    ("pod-patch-of-its-image", "cluster", CLUSTER, [PatchObject(reason="x", target=ref("Pod", "p"), merge_patch={
        "spec": {"containers": [{"name": "ray-head", "image": "evil"}]}})], a.POD_PATCH),
    ("pod-patch-of-owner-references", "service", SERVICE, [PatchObject(reason="x", target=ref("Pod", "p"),
                                                                       merge_patch={"metadata": {"ownerReferences": []}})],
     a.POD_PATCH),
    ("secret-delete", "cluster", CLUSTER, [DeleteObject(reason="x", target=ref("Secret", "s"))], a.KIND),
    ("patch-of-another-raycluster", "cluster", CLUSTER,
     [PatchObject(reason="x", target=ref("RayCluster", "victim", api_version="ray.io/v1"), merge_patch={})],
     a.FOREIGN_TARGET),
    ("rayjob-deletes-a-cluster-it-does-not-own", "job", JOB,
     [DeleteObject(reason="x", target=ref("RayCluster", "victim", api_version="ray.io/v1"))], a.FOREIGN_TARGET),
    ("rayjob-creates-a-cluster-owned-by-another-job", "job", JOB,
     [create({"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": {},
              "metadata": {"name": "x", "namespace": NS, "ownerReferences": [owner("RayJob", "other", "uid-o")]}})],
     a.OWNER),
    ("cluster-controller-creates-a-raycluster", "cluster", CLUSTER,
     [create({"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": {},
              "metadata": {"name": "x", "namespace": NS, "ownerReferences": [owner()]}})], a.KIND),
    ("serve-service-owned-by-a-foreign-cluster", "service", SERVICE, [create(serve_svc("victim", "uid-victim"))],
     a.FOREIGN_TARGET),
    ("serve-service-with-a-wrong-cluster-uid", "service", SERVICE, [create(serve_svc("rs-abcde", "uid-x"))], a.OWNER),
    ("batch-kind-of-another-controller", "cluster", JOB, [], a.UNKNOWN_CONTROLLER),
]


@pytest.mark.parametrize(("controller", "primary", "commands", "reason"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_forged_batch_is_refused(controller: str, primary: Json, commands: list[Command], reason: str) -> None:
    kind = a.PRIMARY[controller][0] if reason != a.UNKNOWN_CONTROLLER else "rayjob"
    meta = primary["metadata"]
    result = a.admit(controller=controller, kind=kind, namespace=meta["namespace"], name=meta["name"],
                     uid=meta["uid"], commands=commands, view=WORLD)
    assert (result.admitted, result.reason, result.retry) == (False, reason, False), result.detail
    # the same batch without the forged command is admitted (the refusal is about that command)
    if reason != a.UNKNOWN_CONTROLLER:
        assert verdict(controller, primary, [], WORLD).admitted


def test_legit_counterparts_are_admitted() -> None:
    """The table's objects, made the way the decision code makes them, pass."""
    commands: list[Command] = [create(pod()), create(role(RULES)), create(binding()),
                               create({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                                       "metadata": {"name": "rc", "namespace": NS, "ownerReferences": [owner()]}},
                                      generated_data_keys=("auth_token",)),
                               PatchObject(reason="x", target=ref("Pod", "p"),
                                           merge_patch={"metadata": {"labels": {"ray.io/serve": "true"}}}),
                               UpdateStatus(reason="x", target=ref("RayCluster", "rc", api_version="ray.io/v1"),
                                            status={})]
    assert verdict("cluster", CLUSTER, commands, WORLD).admitted
    assert verdict("service", SERVICE, [create(serve_svc("rs-abcde", "uid-rs-abcde"))], WORLD).admitted


def test_an_object_not_seen_yet_is_retried_and_a_deleted_one_refused() -> None:
    new = copy.deepcopy(CLUSTER)
    new["metadata"] |= {"name": "fresh", "uid": "uid-fresh"}
    result = verdict("cluster", new, [], WORLD)
    assert (result.admitted, result.reason, result.retry) == (False, a.OBJECT_NOT_LIVE, True)
    assert verdict("cluster", new, [], view(new)).admitted  # once the watch has it
    gone = view(OTHER_CLUSTER, gone=["uid-fresh"])
    result = verdict("cluster", new, [], gone)
    assert (result.admitted, result.reason, result.retry) == (False, a.OBJECT_DELETED, False)
    # a recreated object (same name, new uid) while the batch names the old one: refused once gone
    recreated = copy.deepcopy(new)
    recreated["metadata"]["uid"] = "uid-fresh-2"
    result = verdict("cluster", new, [], view(recreated, gone=["uid-fresh"]))
    assert (result.admitted, result.reason, result.retry) == (False, a.OBJECT_DELETED, False)
    # a RayService's serve Service for a cluster the watch has not delivered yet: retried
    result = verdict("service", SERVICE, [create(serve_svc("rs-new", "uid-rs-new"))], WORLD)
    assert (result.admitted, result.retry) == (False, True)


# --- property: any forging mutation of any command of a real batch is refused -----------------------------
def _real_batches() -> list[tuple[Json, list[Command]]]:
    out = []
    for _, raw in CLUSTERS[::4]:
        raw = copy.deepcopy(raw)
        raw["spec"]["enableInTreeAutoscaling"] = True
        d = reconcile_cluster(ClusterSnapshot(cluster=RayCluster.model_validate(raw)), settings=OperatorSettings(),
                              now=T0, entropy="p")
        creates = [c for c in d.commands if isinstance(c, CreateObject)]
        if creates:
            out.append((raw, list(d.commands)))
    return out


REAL = _real_batches()




def _mutations() -> dict[str, Callable[[Json], Json | None]]:
    def other_ns(o: Json) -> Json:
        o["metadata"]["namespace"] = "kube-system"
        return o

    def no_owner(o: Json) -> Json:
        o["metadata"]["ownerReferences"] = []
        return o

    def other_uid(o: Json) -> Json:
        o["metadata"]["ownerReferences"] = [dict(r, uid="uid-forged") for r in o["metadata"]["ownerReferences"]]
        return o

    def cluster_scoped(o: Json) -> Json | None:
        kinds = {"Role": "ClusterRole", "RoleBinding": "ClusterRoleBinding"}
        if o["kind"] not in kinds:
            return None
        o["kind"] = kinds[o["kind"]]
        return o

    def extra_rule(o: Json) -> Json | None:
        if o["kind"] != "Role":
            return None
        o["rules"] = [*o["rules"], {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
        return o

    def relabel(o: Json) -> Json | None:
        if o["kind"] != "Pod":
            return None
        o["metadata"]["labels"]["ray.io/cluster"] = "victim"
        return o

    return {"other_ns": other_ns, "no_owner": no_owner, "other_uid": other_uid, "cluster_scoped": cluster_scoped,
            "extra_rule": extra_rule, "relabel": relabel}


MUTATIONS = _mutations()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_forged_create_in_a_real_batch_is_refused(data: st.DataObject) -> None:
    raw, commands = data.draw(st.sampled_from(REAL))
    assert verdict("cluster", raw, commands, view(raw)).admitted
    index = data.draw(st.sampled_from([i for i, c in enumerate(commands) if isinstance(c, CreateObject)]))
    cmd = commands[index]
    assert isinstance(cmd, CreateObject)
    mutated = MUTATIONS[data.draw(st.sampled_from(sorted(MUTATIONS)))](copy.deepcopy(cmd.object))
    if mutated is None:
        return
    forged = [*commands[:index], cmd.model_copy(update={"object": mutated}), *commands[index + 1:]]
    result = verdict("cluster", raw, forged, view(raw))
    assert not result.admitted and not result.retry and result.reason and result.detail
