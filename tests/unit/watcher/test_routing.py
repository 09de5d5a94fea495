"""Owner routing, secret stripping and relist diffs of the watcher (pure functions)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raybus.adapters.informer import diff_relist
from raybus.bus import subjects as s
from watcher.routing import (
    WATCHES,
    Route,
    batch_scheduler_watches,
    cluster_owner,
    msg_id,
    only_cluster_decisions_read,
    pod_update_matters,
    ray_owner,
    routes,
    sanitize,
    scope_of,
    self_update_matters,
    woken_by_their_cache,
)

C, J, S = s.Controller.CLUSTER, s.Controller.JOB, s.Controller.SERVICE
names = st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)


def obj(kind: str, name: str, *, ns: str = "ns", labels: dict[str, str] | None = None,
        owners: list[dict[str, Any]] | None = None, rv: str = "1", uid: str = "u") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind,
            "metadata": {"name": name, "namespace": ns, "labels": labels or {}, "uid": uid,
                         "resourceVersion": rv, "ownerReferences": owners or []}}


def owner(kind: str, name: str, controller: bool = True, api: str = "ray.io/v1") -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind, "name": name, "uid": f"uid-{name}",
            "controller": controller}


def test_raycluster_routes_to_itself_and_its_rayjob_owner() -> None:
    rc = obj("RayCluster", "c1", owners=[owner("RayJob", "j1")])
    assert routes(s.Kind.RAYCLUSTER, rc, service_owners={}) == (
        Route(C, s.Kind.RAYCLUSTER, "ns", "c1"), Route(J, s.Kind.RAYJOB, "ns", "j1"))
    rc2 = obj("RayCluster", "c2", owners=[owner("RayService", "svc")])
    assert Route(S, s.Kind.RAYSERVICE, "ns", "svc") in routes(s.Kind.RAYCLUSTER, rc2, service_owners={})
    assert routes(s.Kind.RAYJOB, obj("RayJob", "j"), service_owners={}) == (
        Route(J, s.Kind.RAYJOB, "ns", "j"),)
    assert routes(s.Kind.RAYSERVICE, obj("RayService", "x"), service_owners={}) == (
        Route(S, s.Kind.RAYSERVICE, "ns", "x"),)


@given(cluster=names, pod=names, ns=names)
def test_pod_with_cluster_label_routes_to_that_cluster(cluster: str, pod: str, ns: str) -> None:
    p = obj("Pod", pod, ns=ns, labels={"ray.io/cluster": cluster, "ray.io/node-type": "worker"})
    assert routes(s.Kind.POD, p, service_owners={}) == (Route(C, s.Kind.RAYCLUSTER, ns, cluster),)


def test_owned_kinds_route_to_controlling_owner_only() -> None:
    refs = [owner("RayCluster", "not-controller", controller=False), owner("RayService", "boss")]
    for kind in (s.Kind.SERVICE, s.Kind.INGRESS, s.Kind.SERVICEACCOUNT, s.Kind.ROLE, s.Kind.ROLEBINDING):
        assert routes(kind, obj("X", "x", owners=refs), service_owners={}) == (
            Route(S, s.Kind.RAYSERVICE, "ns", "boss"),)
    job = obj("Job", "submitter", owners=[owner("RayJob", "j1")])
    assert routes(s.Kind.JOB, job, service_owners={}) == (Route(J, s.Kind.RAYJOB, "ns", "j1"),)
    # Not ray.io-owned (a Deployment's ReplicaSet, a foreign CRD with a RayCluster kind): nobody.
    foreign = obj("Service", "s", owners=[owner("ReplicaSet", "rs", api="apps/v1"),
                                          owner("RayCluster", "c", api="other.io/v1")])
    assert routes(s.Kind.SERVICE, foreign, service_owners={}) == ()
    assert ray_owner(foreign) is None


def test_endpointslice_routes_via_its_service_owner() -> None:
    svc_routes = (Route(S, s.Kind.RAYSERVICE, "ns", "rs"),)
    es = obj("EndpointSlice", "rs-serve-abc", labels={"kubernetes.io/service-name": "rs-serve"})
    assert routes(s.Kind.ENDPOINTSLICE, es, service_owners={("ns", "rs-serve"): svc_routes}) == svc_routes
    assert routes(s.Kind.ENDPOINTSLICE, es, service_owners={}) == ()
    assert routes(s.Kind.ENDPOINTSLICE, es, service_owners={("other", "rs-serve"): svc_routes}) == ()
    labelled = obj("EndpointSlice", "e", labels={"kubernetes.io/service-name": "h",
                                                 "ray.io/cluster": "c9"})
    assert routes(s.Kind.ENDPOINTSLICE, labelled, service_owners={}) == (
        Route(C, s.Kind.RAYCLUSTER, "ns", "c9"),)


# --- RayService: head Pods of its clusters, per-cluster serve Services, Gateway API objects -------------------
SVC_ROUTE = Route(S, s.Kind.RAYSERVICE, "ns", "rs")
OWNED_CLUSTERS = {("ns", "rs-abcde"): SVC_ROUTE, ("ns", "job-cluster"): Route(J, s.Kind.RAYJOB, "ns", "j1")}
ORIGIN = {"ray.io/originated-from-crd": "RayService", "ray.io/originated-from-cr-name": "rs"}


def _pod(cluster: str, node_type: str, ns: str = "ns") -> dict[str, Any]:
    return obj("Pod", f"{cluster}-{node_type}", ns=ns, labels={"ray.io/cluster": cluster, "ray.io/node-type": node_type})


@pytest.mark.parametrize(("kind", "o", "expected"), [
    # The head Pod of a RayService's cluster wakes its cluster and the RayService (ray.io/serve label).
    (s.Kind.POD, _pod("rs-abcde", "head"), (Route(C, s.Kind.RAYCLUSTER, "ns", "rs-abcde"), SVC_ROUTE)),
    # Workers do not matter to the RayService.
    (s.Kind.POD, _pod("rs-abcde", "worker"), (Route(C, s.Kind.RAYCLUSTER, "ns", "rs-abcde"),)),
    # A head of a cluster no RayService owns, or in another namespace: only its cluster.
    (s.Kind.POD, _pod("plain", "head"), (Route(C, s.Kind.RAYCLUSTER, "ns", "plain"),)),
    (s.Kind.POD, _pod("rs-abcde", "head", ns="other"), (Route(C, s.Kind.RAYCLUSTER, "other", "rs-abcde"),)),
    # A RayJob's cluster: its head Pod (SidecarMode's submitter container) wakes the RayJob too.
    (s.Kind.POD, _pod("job-cluster", "head"), (Route(C, s.Kind.RAYCLUSTER, "ns", "job-cluster"),
                                               Route(J, s.Kind.RAYJOB, "ns", "j1"))),
    (s.Kind.POD, _pod("job-cluster", "worker"), (Route(C, s.Kind.RAYCLUSTER, "ns", "job-cluster"),)),
    # <cluster>-serve-svc: owned by the RayCluster, used by the RayService (incremental upgrade).
    (s.Kind.SERVICE, obj("Service", "rs-abcde-serve-svc", labels=ORIGIN, owners=[owner("RayCluster", "rs-abcde")]),
     (Route(C, s.Kind.RAYCLUSTER, "ns", "rs-abcde"), SVC_ROUTE)),
    # The cluster's own head Service: its cluster only.
    (s.Kind.SERVICE, obj("Service", "rs-abcde-head-svc", labels={"ray.io/originated-from-crd": "RayCluster",
                                                                 "ray.io/originated-from-cr-name": "rs-abcde"},
                         owners=[owner("RayCluster", "rs-abcde")]), (Route(C, s.Kind.RAYCLUSTER, "ns", "rs-abcde"),)),
    # The RayService's own Services, Gateway and HTTPRoute: their owner, once.
    (s.Kind.SERVICE, obj("Service", "rs-serve-svc", labels=ORIGIN, owners=[owner("RayService", "rs")]), (SVC_ROUTE,)),
    (s.Kind.GATEWAY, obj("Gateway", "rs-gateway", owners=[owner("RayService", "rs")]), (SVC_ROUTE,)),
    (s.Kind.HTTPROUTE, obj("HTTPRoute", "rs-httproute", owners=[owner("RayService", "rs")]), (SVC_ROUTE,)),
    (s.Kind.GATEWAY, obj("Gateway", "someone-elses"), ()),
])
def test_rayservice_routing(kind: s.Kind, o: dict[str, Any], expected: tuple[Route, ...]) -> None:
    assert routes(kind, o, service_owners={}, cluster_owners=OWNED_CLUSTERS) == expected


# --- RayJob: everything its snapshot reads wakes it -------------------------------------------------------
JOB_ROUTE = Route(J, s.Kind.RAYJOB, "ns", "j1")
JOB_CLUSTER = {("ns", "j1-x7k2p"): JOB_ROUTE}
JOB_ORIGIN = {"ray.io/originated-from-crd": "RayJob", "ray.io/originated-from-cr-name": "j1"}


@pytest.mark.parametrize(("kind", "o", "expected"), [
    # Its RayCluster (Owns(RayCluster)).
    (s.Kind.RAYCLUSTER, obj("RayCluster", "j1-x7k2p", labels=JOB_ORIGIN, owners=[owner("RayJob", "j1")]),
     (Route(C, s.Kind.RAYCLUSTER, "ns", "j1-x7k2p"), JOB_ROUTE)),
    # The submitter batch Job (Owns(batch Job)), labelled as KubeRay's createNewK8sJob does.
    (s.Kind.JOB, obj("Job", "j1", labels={**JOB_ORIGIN, "app.kubernetes.io/created-by": "kuberay-operator"},
                     owners=[owner("RayJob", "j1")]), (JOB_ROUTE,)),
    # <rayjob>-head-svc (reconcileServices: owned by the RayJob, selecting the current cluster's head).
    (s.Kind.SERVICE, obj("Service", "j1-head-svc", labels={**JOB_ORIGIN, "ray.io/node-type": "head"},
                         owners=[owner("RayJob", "j1")]), (JOB_ROUTE,)),
    # The cluster's head Pod (SidecarMode's submitter container): its cluster and the RayJob.
    (s.Kind.POD, _pod("j1-x7k2p", "head"), (Route(C, s.Kind.RAYCLUSTER, "ns", "j1-x7k2p"), JOB_ROUTE)),
    # Worker Pods and the submitter Job's own Pods never wake the RayJob.
    (s.Kind.POD, _pod("j1-x7k2p", "worker"), (Route(C, s.Kind.RAYCLUSTER, "ns", "j1-x7k2p"),)),
    (s.Kind.POD, obj("Pod", "j1-abcde", owners=[owner("Job", "j1", api="batch/v1")]), ()),
    # A head Pod of a cluster that only looks like the RayJob's (other namespace, not owned).
    (s.Kind.POD, _pod("j1-x7k2p", "head", ns="other"), (Route(C, s.Kind.RAYCLUSTER, "other", "j1-x7k2p"),)),
])
def test_rayjob_routing(kind: s.Kind, o: dict[str, Any], expected: tuple[Route, ...]) -> None:
    assert routes(kind, o, service_owners={}, cluster_owners=JOB_CLUSTER) == expected


@given(job=names, cluster=names, ns=names)
def test_head_pods_follow_the_cluster_owner_map(job: str, cluster: str, ns: str) -> None:
    """Whatever the names: a head Pod wakes the RayJob the watcher learned owns its cluster."""
    rc = obj("RayCluster", cluster, ns=ns, owners=[owner("RayJob", job)])
    learned = cluster_owner(rc)
    assert learned == Route(J, s.Kind.RAYJOB, ns, job)
    head = obj("Pod", f"{cluster}-head", ns=ns, labels={"ray.io/cluster": cluster, "ray.io/node-type": "head"})
    assert routes(s.Kind.POD, head, service_owners={}, cluster_owners={(ns, cluster): learned}) == (
        Route(C, s.Kind.RAYCLUSTER, ns, cluster), learned)


def test_endpointslices_of_a_per_cluster_serve_service_reach_the_rayservice() -> None:
    """The watcher's service->owner map is routes() of the Service, so its slices follow."""
    svc = obj("Service", "rs-abcde-serve-svc", labels=ORIGIN, owners=[owner("RayCluster", "rs-abcde")])
    owners = {("ns", "rs-abcde-serve-svc"): routes(s.Kind.SERVICE, svc, service_owners={})}
    es = obj("EndpointSlice", "rs-abcde-serve-svc-x1", labels={"kubernetes.io/service-name": "rs-abcde-serve-svc"})
    assert SVC_ROUTE in routes(s.Kind.ENDPOINTSLICE, es, service_owners=owners)


def test_cluster_owner_is_the_controlling_rayjob_or_rayservice() -> None:
    assert cluster_owner(obj("RayCluster", "rs-abcde", owners=[owner("RayService", "rs")])) == SVC_ROUTE
    assert cluster_owner(obj("RayCluster", "c", owners=[owner("RayJob", "j1")])) == Route(J, s.Kind.RAYJOB, "ns", "j1")
    assert cluster_owner(obj("RayCluster", "c")) is None


def test_gateway_api_objects_are_watched_only_when_owned() -> None:
    specs = {w.kind: w for w in WATCHES}
    for kind, k8s_kind in ((s.Kind.GATEWAY, "Gateway"), (s.Kind.HTTPROUTE, "HTTPRoute")):
        assert specs[kind].api_version == "gateway.networking.k8s.io/v1" and specs[kind].k8s_kind == k8s_kind
        assert specs[kind].owned_only


# Values are marked so "found in the output" can only mean leaked (a bare "anno" would also be
# found inside the key "annotations").
secret_values = st.dictionaries(st.text(min_size=1, max_size=10),
                                st.text(min_size=1, max_size=30).map(lambda v: f"s3cr3t:{v}"),
                                min_size=1, max_size=5)


@given(data=secret_values, string_data=secret_values, name=names)
def test_secret_values_never_survive_sanitize(data: dict[str, str], string_data: dict[str, str],
                                              name: str) -> None:
    secret = obj("Secret", name)
    secret["data"] = data
    secret["stringData"] = string_data
    secret["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps({"data": data}), "keep": "me"}
    secret["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    out = sanitize(secret)
    assert "data" not in out and "stringData" not in out
    assert out["metadata"]["annotations"] == {"keep": "me"}
    assert "managedFields" not in out["metadata"]
    assert "data" in secret  # the input is not mutated
    dumped = json.dumps(out)
    for value in [*data.values(), *string_data.values()]:
        assert json.dumps(value)[1:-1] not in dumped


def test_sanitize_drops_managed_fields_keeps_everything_else() -> None:
    pod = obj("Pod", "p")
    pod["metadata"]["managedFields"] = [{"manager": "x"}]
    pod["spec"] = {"containers": [{"name": "c"}]}
    out = sanitize(pod)
    assert "managedFields" not in out["metadata"] and out["spec"] == pod["spec"]


def test_relist_diff_like_deltafifo_replace() -> None:
    known = {("ns", "a"): obj("Pod", "a", rv="1"), ("ns", "b"): obj("Pod", "b", rv="1"),
             ("ns", "c"): obj("Pod", "c", rv="1", uid="old")}
    items = [obj("Pod", "a", rv="1"), obj("Pod", "c", rv="1", uid="new"), obj("Pod", "d", rv="5")]
    changes = {(t, o["metadata"]["name"]) for t, o in diff_relist(known, items)}
    assert changes == {("DELETED", "b"), ("SYNC", "c"), ("SYNC", "d")}


@given(rv=st.integers(min_value=1), name=names)
def test_msg_id_distinguishes_versions_and_deletion(rv: int, name: str) -> None:
    o = obj("Pod", name, rv=str(rv))
    assert msg_id(s.Kind.POD, o, event_type="MODIFIED") == f"pod/ns/{name}/{rv}"
    assert msg_id(s.Kind.POD, o, event_type="DELETED") != msg_id(s.Kind.POD, o, event_type="MODIFIED")


def _cr(gen: int = 1, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        status: str = "", deleting: bool = False) -> dict[str, Any]:
    m: dict[str, Any] = {"name": "x", "namespace": "ns", "uid": "u", "generation": gen,
                         "labels": labels or {}, "annotations": annotations or {}}
    if deleting:
        m["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": m, "status": {"state": status}}


@pytest.mark.parametrize(("kind", "old", "new", "wakes"), [
    # KubeRay's predicate.Or(GenerationChanged, LabelChanged, AnnotationChanged) on For():
    (s.Kind.RAYCLUSTER, _cr(), _cr(status="ready"), False),  # our own status write
    (s.Kind.RAYCLUSTER, _cr(), _cr(gen=2), True),  # spec change (e.g. the autoscaler)
    (s.Kind.RAYCLUSTER, _cr(), _cr(labels={"a": "b"}), True),
    (s.Kind.RAYCLUSTER, _cr(), _cr(annotations={"a": "b"}), True),
    (s.Kind.RAYCLUSTER, _cr(), _cr(deleting=True), True),
    (s.Kind.RAYCLUSTER, None, _cr(status="ready"), True),  # a create always passes
    (s.Kind.RAYSERVICE, _cr(), _cr(status="ready"), False),
    (s.Kind.RAYJOB, _cr(), _cr(status="ready"), True),  # For(RayJob) has no predicate
    (s.Kind.POD, _cr(), _cr(status="ready"), True),
])
def test_self_update_predicates(kind: s.Kind, old: dict[str, Any] | None, new: dict[str, Any],
                                wakes: bool) -> None:
    assert self_update_matters(kind, old, new) is wakes


def _owned_cluster(owner_kind: str | None) -> dict[str, Any]:
    refs = [{"apiVersion": "ray.io/v1", "kind": owner_kind, "name": "owner", "controller": True}] \
        if owner_kind else []
    return {"metadata": {"name": "rc", "namespace": "ns", "ownerReferences": refs}}


@pytest.mark.parametrize(("owner_kind", "scope"), [
    ("RayJob", "rayjob"), ("RayService", "rayservice"), (None, "_"),  # a user's own RayCluster
])
def test_scope_of_a_cluster_and_its_pods_is_its_owner(owner_kind: str | None, scope: str) -> None:
    """KubeRay labels no Pod with its origin: a Pod's scope is its cluster's owner's."""
    cluster = _owned_cluster(owner_kind)
    assert scope_of(s.Kind.RAYCLUSTER, cluster) == scope
    owner = cluster_owner(cluster)
    owners = {("ns", "rc"): owner} if owner is not None else {}
    pod = {"metadata": {"name": "rc-head-x", "namespace": "ns", "labels": {"ray.io/cluster": "rc"}}}
    assert scope_of(s.Kind.POD, pod, cluster_owners=owners) == scope
    assert scope_of(s.Kind.SERVICE, pod, cluster_owners=owners) == "_"  # scoped kinds only


def _pod(node_type: str = "worker", **status: Any) -> dict[str, Any]:
    p = obj("Pod", "rc-w", labels={"ray.io/cluster": "rc", "ray.io/node-type": node_type})
    p["spec"] = {"containers": [{"name": "ray"}]}
    p["status"] = {"phase": "Pending", "conditions": [], **status}
    return p


def _with(p: dict[str, Any], rv: str, spec: dict[str, Any] | None = None, **status: Any) -> dict[str, Any]:
    out = {**p, "metadata": {**p["metadata"], "resourceVersion": rv},
           "spec": {**p["spec"], **(spec or {})}, "status": {**p["status"], **status}}
    return out


@pytest.mark.parametrize(("node_type", "change", "wakes"), [
    # the scheduler's binding and the kubelet's bookkeeping: no RayCluster decision reads them
    ("worker", {"spec": {"nodeName": "n1"},
                "conditions": [{"type": "PodScheduled", "status": "True"}]}, False),
    ("worker", {"podIP": "10.0.0.7", "podIPs": [{"ip": "10.0.0.7"}], "hostIP": "172.18.0.2",
                "startTime": "2026-01-01T00:00:00Z"}, False),
    ("worker", {"initContainerStatuses": [{"name": "wait-gcs-ready", "state": {"running": {}}}]}, False),
    ("head", {"podIP": "10.0.0.7"}, True),  # the head's podIP is status.head.podIP
    ("worker", {"phase": "Running"}, True),
    # a worker's Ready condition counts only while Running, its containers only by the Ray
    # container's terminated state (podutil._worker_status_view); the head's are read whole
    ("worker", {"conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}]}, False),
    ("head", {"conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}]}, True),
    ("worker", {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}, True),
    ("worker", {"containerStatuses": [{"name": "ray", "state": {"waiting": {"reason": "X"}}}]}, False),
    ("head", {"containerStatuses": [{"name": "ray", "state": {"waiting": {"reason": "X"}}}]}, True),
    ("worker", {"containerStatuses": [{"name": "ray", "state": {"terminated": {"exitCode": 1}}}]}, True),
    ("worker", {"containerStatuses": [{"name": "sidecar", "state": {"terminated": {"exitCode": 1}}}]}, False),
])
def test_pod_updates_wake_their_raycluster_only_when_a_decision_reads_the_change(
        node_type: str, change: dict[str, Any], wakes: bool) -> None:
    old = _pod(node_type)
    spec = change.pop("spec", None)
    assert pod_update_matters(s.Kind.POD, old, _with(old, "2", spec, **change)) is wakes
    # other kinds, and a first sighting, always wake
    assert pod_update_matters(s.Kind.SERVICE, old, _with(old, "2", spec, **change))
    assert pod_update_matters(s.Kind.POD, None, old)


def test_label_change_wakes() -> None:
    old = _pod()
    new = copy.deepcopy(old)
    new["metadata"]["labels"]["ray.io/group"] = "g2"
    assert pod_update_matters(s.Kind.POD, old, new)


@pytest.mark.parametrize(("kind", "node_type", "only_cluster"), [
    (s.Kind.POD, "worker", True),
    # head Pods: the RayJob (SidecarMode's submitter) and RayService (ray.io/serve) read them too
    (s.Kind.POD, "head", False),
    (s.Kind.POD, "redis-cleanup", False),
    (s.Kind.SERVICE, "worker", False),
])
def test_only_worker_pods_are_read_by_the_cluster_decisions_alone(
        kind: s.Kind, node_type: str, only_cluster: bool) -> None:
    """Whose unread updates the watcher may leave unpublished (watcher.app.on_change)."""
    assert only_cluster_decisions_read(kind, _pod(node_type)) is only_cluster


def test_a_labelled_pod_triggers_no_raycluster_but_its_owner_still() -> None:
    """The RayCluster wakes from its reconciler's cache (podutil.clusters_to_wake); the RayJob or
    RayService of a head Pod has no such cache hook and is still triggered."""
    head = _pod("head")
    owners = {("ns", "rc"): Route(s.Controller.JOB, s.Kind.RAYJOB, "ns", "job")}
    targets = routes(s.Kind.POD, head, service_owners={}, cluster_owners=owners)
    assert {r.controller for r in targets} == {s.Controller.CLUSTER, s.Controller.JOB}
    assert woken_by_their_cache(s.Kind.POD, targets, head, None) == (owners[("ns", "rc")],)
    # relabelled: neither the old nor the new cluster is triggered
    moved = copy.deepcopy(head)
    moved["metadata"]["labels"]["ray.io/cluster"] = "rc2"
    both = (Route(s.Controller.CLUSTER, s.Kind.RAYCLUSTER, "ns", "rc2"),
            Route(s.Controller.CLUSTER, s.Kind.RAYCLUSTER, "ns", "rc"))
    assert woken_by_their_cache(s.Kind.POD, both, moved, head) == ()
    # other kinds keep their RayCluster triggers
    assert woken_by_their_cache(s.Kind.SERVICE, both, moved, head) == both
    # an unlabelled Pod routed by its ownerReference keeps its trigger
    bare = {"metadata": {"name": "x", "namespace": "ns", "ownerReferences": [
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc", "controller": True}]}}
    assert woken_by_their_cache(s.Kind.POD, both[1:], bare, None) == both[1:]


def test_no_secret_is_watched() -> None:
    """No raybus ServiceAccount may list or watch Secrets (raybus-bus holds every bus credential):
    the RayCluster's token Secret is known from its create's answer instead."""
    specs = [*WATCHES, *batch_scheduler_watches("volcano"), *batch_scheduler_watches("scheduler-plugins")]
    assert all(spec.k8s_kind != "Secret" for spec in specs)
