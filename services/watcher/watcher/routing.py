"""Pure watcher logic: what to watch, what to strip, and which controller to wake for an object.

Routing follows controller-runtime's `Owns()`/`Watches()` wiring in KubeRay:
- RayClusterReconciler: For(RayCluster), Owns(Pod, Service, ServiceAccount, Role, RoleBinding,
  Ingress/Route) -> EnqueueRequestForOwner(RayCluster), i.e. the *controlling* ownerRef.
- RayJobReconciler: For(RayJob), Owns(RayCluster, Service, batch Job); raybus also wakes it for
  the head Pods of its cluster (SidecarMode's submitter container).
- RayServiceReconciler: For(RayService), Owns(RayCluster, Service, Ingress, Gateway, HTTPRoute); its
  serve endpoints are checked through EndpointSlices of its Services. KubeRay polls the rest every
  2 s; raybus instead also wakes it for the head Pods of its clusters (their ray.io/serve label and
  readiness) and the per-cluster serve Services (`<cluster>-serve-svc`, owned by the RayCluster but
  labelled ray.io/originated-from-crd=RayService) and their EndpointSlices.
Pods are routed by the ray.io/cluster label (KubeRay's pod watch maps pods to their cluster the
same way, and a head pod is owned by its RayCluster anyway).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from raybus.adapters.informer import meta
from raybus.bus import subjects as s
from raybus.decisions.cluster.batch_scheduler import pod_group_api_version
from raybus.decisions.cluster.podutil import decision_view

Json = dict[str, Any]
CLUSTER_LABEL = "ray.io/cluster"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
NODE_TYPE_LABEL = "ray.io/node-type"
ORIGINATED_FROM_CR_NAME = "ray.io/originated-from-cr-name"
ORIGINATED_FROM_CRD = "ray.io/originated-from-crd"
CREATED_BY = "app.kubernetes.io/created-by=kuberay-operator"
# KubeRay narrows its pod cache to Ray node pods (head, worker, and the GCS-FT redis cleanup job's).
RAY_POD_SELECTOR = "ray.io/node-type in (head,worker,redis-cleanup)"


@dataclass(frozen=True)
class WatchSpec:
    kind: s.Kind
    api_version: str
    k8s_kind: str
    label_selector: str | None = None
    # Objects only matter when some raybus controller owns them (ray.io ownerRef / label).
    owned_only: bool = False
    # A CRD the cluster may not have (Gateway API, a batch scheduler's PodGroup): watched only while
    # API discovery shows it (watcher.optional), never a list/watch retried against a 404.
    optional: bool = False
    metadata_only: bool = False  # the watcher publishes whole objects

    @property
    def name(self) -> str:
        return self.kind.value


WATCHES: tuple[WatchSpec, ...] = (
    WatchSpec(s.Kind.RAYCLUSTER, "ray.io/v1", "RayCluster"),
    WatchSpec(s.Kind.RAYJOB, "ray.io/v1", "RayJob"),
    WatchSpec(s.Kind.RAYSERVICE, "ray.io/v1", "RayService"),
    WatchSpec(s.Kind.POD, "v1", "Pod", label_selector=RAY_POD_SELECTOR),
    # Services first among owned kinds: EndpointSlices route through the service->owner map.
    WatchSpec(s.Kind.SERVICE, "v1", "Service", owned_only=True),
    # KubeRay's manager narrows its Job cache to the submitter Jobs it created (main.go cacheSelectors).
    WatchSpec(s.Kind.JOB, "batch/v1", "Job", label_selector=CREATED_BY),
    WatchSpec(s.Kind.ENDPOINTSLICE, "discovery.k8s.io/v1", "EndpointSlice", owned_only=True),
    WatchSpec(s.Kind.INGRESS, "networking.k8s.io/v1", "Ingress", owned_only=True),
    WatchSpec(s.Kind.SERVICEACCOUNT, "v1", "ServiceAccount", owned_only=True),
    WatchSpec(s.Kind.ROLE, "rbac.authorization.k8s.io/v1", "Role", owned_only=True),
    WatchSpec(s.Kind.ROLEBINDING, "rbac.authorization.k8s.io/v1", "RoleBinding", owned_only=True),
    # NewClusterWithIncrementalUpgrade only; the Gateway API is CRDs a cluster may lack: watched
    # once discovery serves them (watcher.optional).
    WatchSpec(s.Kind.GATEWAY, "gateway.networking.k8s.io/v1", "Gateway", owned_only=True, optional=True),
    WatchSpec(s.Kind.HTTPROUTE, "gateway.networking.k8s.io/v1", "HTTPRoute", owned_only=True, optional=True),
    WatchSpec(s.Kind.NETWORKPOLICY, "networking.k8s.io/v1", "NetworkPolicy", owned_only=True),
)

# KubeRay's batch scheduler plugins Owns() their PodGroup CRD: watched only when the operator runs
# with that --batch-scheduler (the CRD need not exist otherwise).
def batch_scheduler_watches(batch_scheduler: str) -> tuple[WatchSpec, ...]:
    api_version = pod_group_api_version(batch_scheduler)
    if api_version is None:
        return ()
    return (WatchSpec(s.Kind.PODGROUP, api_version, "PodGroup", owned_only=True, optional=True),)

_OWNER_KINDS: dict[str, tuple[s.Controller, s.Kind]] = {
    "RayCluster": (s.Controller.CLUSTER, s.Kind.RAYCLUSTER),
    "RayJob": (s.Controller.JOB, s.Kind.RAYJOB),
    "RayService": (s.Controller.SERVICE, s.Kind.RAYSERVICE),
}


@dataclass(frozen=True, order=True)
class Route:
    """Wake `controller` for the object `kind` namespace/name."""

    controller: s.Controller
    kind: s.Kind
    namespace: str
    name: str


# What each container of a published Pod leaves out: what the container runs (command, args,
# env, probes, mounts), two thirds of a KubeRay Pod's bytes. No bus reader looks at them: the
# RayCluster decisions read containers[0].name (getRayContainerStateTerminated) and
# spec.restartPolicy, the RayService decisions the Ray container's ports (FindContainerPort),
# the RayJob decisions only a head Pod's metadata and status; Pods are created from the
# RayCluster's template and changed by merge patches of metadata, never written back from the
# cache. A running Pod's container spec is immutable but for the image, which is kept. Every Pod
# event is encoded once here and decoded by every reconciler that follows Pods, so the fields
# nobody reads are dropped before that.
_UNREAD_CONTAINER_FIELDS = ("command", "args", "env", "envFrom", "livenessProbe", "readinessProbe",
                            "startupProbe", "lifecycle", "volumeMounts", "volumeDevices")
_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def _slim_pod_spec(spec: Json) -> Json:
    out = dict(spec)
    for field in _CONTAINER_LISTS:
        containers = spec.get(field)
        if isinstance(containers, list):
            out[field] = [{k: v for k, v in c.items() if k not in _UNREAD_CONTAINER_FIELDS}
                          if isinstance(c, dict) else c for c in containers]
    return out


def sanitize(obj: Json) -> Json:
    """Copy of obj safe to publish: no managedFields (noise, half the bytes of a pod), a Pod's
    containers without what they run (_UNREAD_CONTAINER_FIELDS), and never a Secret's values,
    including kubectl's last-applied annotation, which would repeat them. Idempotent."""
    out = dict(obj)
    m = dict(meta(obj))
    m.pop("managedFields", None)
    if obj.get("kind") == "Pod" and isinstance(obj.get("spec"), dict):
        out["spec"] = _slim_pod_spec(obj["spec"])
    if obj.get("kind") == "Secret":
        out.pop("data", None)
        out.pop("stringData", None)
        annotations = dict(m.get("annotations") or {})
        annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
        if annotations or "annotations" in m:
            m["annotations"] = annotations
    out["metadata"] = m
    return out


def ray_owner(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """(kind, name) of the ray.io ownerRef that controls obj: the one with controller=true
    (controllerutil.SetControllerReference), else the first ray.io owner."""
    refs = [r for r in meta(obj).get("ownerReferences") or []
            if isinstance(r, dict) and str(r.get("apiVersion", "")).startswith("ray.io/")
            and r.get("kind") in _OWNER_KINDS and r.get("name")]
    if not refs:
        return None
    ref = next((r for r in refs if r.get("controller")), refs[0])
    return str(ref["kind"]), str(ref["name"])


def _route_to(owner_kind: str, namespace: str, name: str) -> Route:
    controller, kind = _OWNER_KINDS[owner_kind]
    return Route(controller, kind, namespace, name)


def cluster_owner(obj: Mapping[str, Any]) -> Route | None:
    """The RayJob/RayService a RayCluster belongs to (for the `cluster_owners` map of routes())."""
    owner = ray_owner(obj)
    if owner is None or owner[0] not in ("RayJob", "RayService"):
        return None
    return _route_to(owner[0], str(meta(obj).get("namespace") or ""), owner[1])


def routes(kind: s.Kind, obj: Mapping[str, Any], *,
           service_owners: Mapping[tuple[str, str], tuple[Route, ...]],
           cluster_owners: Mapping[tuple[str, str], Route] | None = None) -> tuple[Route, ...]:
    """Every controller that must look again when obj changes (possibly none).
    `cluster_owners`: (namespace, RayCluster) -> the RayJob/RayService owning it."""
    m = meta(obj)
    ns, name = str(m.get("namespace") or ""), str(m.get("name") or "")
    labels = m.get("labels") or {}
    owner = ray_owner(obj)
    out: list[Route] = []
    if kind in (s.Kind.RAYCLUSTER, s.Kind.RAYJOB, s.Kind.RAYSERVICE):
        out.append(_route_to({s.Kind.RAYCLUSTER: "RayCluster", s.Kind.RAYJOB: "RayJob",
                              s.Kind.RAYSERVICE: "RayService"}[kind], ns, name))
        if kind is s.Kind.RAYCLUSTER and owner and owner[0] in ("RayJob", "RayService"):
            out.append(_route_to(owner[0], ns, owner[1]))
    elif kind is s.Kind.POD:
        if labels.get(CLUSTER_LABEL):
            cluster = str(labels[CLUSTER_LABEL])
            out.append(_route_to("RayCluster", ns, cluster))
            owner_route = (cluster_owners or {}).get((ns, cluster))
            if owner_route is not None and labels.get(NODE_TYPE_LABEL) == "head":
                # The RayService labels its head Pods ray.io/serve from their proxy health and
                # reconciles Serve once the head is ready (KubeRay polls this every 2 s). The
                # RayJob reads SidecarMode's submitter container in the head Pod: its end is when
                # the Ray job has most likely ended (KubeRay polls the dashboard every 3 s).
                out.append(owner_route)
        elif owner:
            out.append(_route_to(owner[0], ns, owner[1]))
    elif kind is s.Kind.ENDPOINTSLICE:
        service = labels.get(SERVICE_NAME_LABEL)
        out.extend(service_owners.get((ns, str(service)), ()) if service else ())
        if not out and labels.get(CLUSTER_LABEL):
            # The EndpointSlice controller copies Service labels onto slices: fall back to them.
            out.append(_route_to("RayCluster", ns, str(labels[CLUSTER_LABEL])))
    elif owner:  # Service, Ingress, SA, Role, RoleBinding, batch Job, Gateway, HTTPRoute
        out.append(_route_to(owner[0], ns, owner[1]))
        if kind is s.Kind.SERVICE and owner[0] == "RayCluster" and labels.get(ORIGINATED_FROM_CRD) == "RayService" \
                and labels.get(ORIGINATED_FROM_CR_NAME):
            # The incremental upgrade's <cluster>-serve-svc: its RayCluster owns it, its RayService uses it.
            out.append(_route_to("RayService", ns, str(labels[ORIGINATED_FROM_CR_NAME])))
    return tuple(dict.fromkeys(out))


# KubeRay's For(RayCluster) and For(RayService) carry predicate.Or(GenerationChanged,
# LabelChanged, AnnotationChanged): their own status writes do not trigger them. For(RayJob) has none.
_PREDICATED_SELF = frozenset({s.Kind.RAYCLUSTER, s.Kind.RAYSERVICE})


def self_update_matters(kind: s.Kind, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether an update of a primary object wakes its own controller (creates/deletes always do).
    deletionTimestamp and finalizers also count: the API server bumps generation when it sets the
    former, and a finalizer change is what deletion handling waits for."""
    if kind not in _PREDICATED_SELF or old is None:
        return True
    before, after = meta(old), meta(new)
    return any(before.get(field) != after.get(field) for field in (
        "generation", "labels", "annotations", "deletionTimestamp", "finalizers", "uid"))


def pod_update_matters(kind: s.Kind, old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether a Pod update wakes its RayCluster. KubeRay's Owns(&corev1.Pod{}) has no predicate:
    every update reconciles, and one that changed only what no decision reads (the scheduler's
    binding, the kubelet's podIP/startTime/init-container bookkeeping: podutil.decision_view)
    decides exactly what the previous one did. Skipping those is a third of a worker Pod's
    updates; the object is still published, so the cache stays current."""
    if kind is not s.Kind.POD or old is None:
        return True
    return bool(decision_view(old) != decision_view(new))


def only_cluster_decisions_read(kind: s.Kind, obj: Mapping[str, Any]) -> bool:
    """Whether the RayCluster decisions are the only bus reader of this object: a worker Pod.
    The RayJob and RayService reconcilers follow head Pods alone (their snapshots filter on
    podutil.is_head), and Pods are never written back from the cache. So a worker Pod update
    that changes nothing of its decision_view (pod_update_matters) is not published at all:
    a third of a worker's updates (the scheduler's binding, the kubelet's hostIP/startTime/
    podIP), each one a publish, an ack and a decode in every reconciler following Pods, for a
    version nobody reads differently. The bus then holds a worker Pod as of its
    last change a decision reads; the next published version carries everything."""
    return kind is s.Kind.POD and (meta(obj).get("labels") or {}).get(NODE_TYPE_LABEL) == "worker"


def woken_by_their_cache(kind: s.Kind, targets: tuple[Route, ...], obj: Mapping[str, Any],
                         old: Mapping[str, Any] | None) -> tuple[Route, ...]:
    """`targets` without the RayClusters a Pod event wakes through their reconciler's own cache
    (cluster_reconciler.app._on_pod, podutil.clusters_to_wake: by the ray.io/cluster label): no
    trigger is published for them (a trigger per Pod version was a third of the bus's messages
    per Pod). The RayJob/RayService of a head Pod are still triggered."""
    if kind is not s.Kind.POD:
        return targets
    labelled = {(str(meta(p).get("namespace") or ""), str((meta(p).get("labels") or {}).get(CLUSTER_LABEL)))
                for p in (obj, old) if p is not None and (meta(p).get("labels") or {}).get(CLUSTER_LABEL)}
    return tuple(r for r in targets
                 if not (r.controller is s.Controller.CLUSTER and (r.namespace, r.name) in labelled))


_OWNER_SCOPES = {s.Controller.JOB: "rayjob", s.Controller.SERVICE: "rayservice"}


def scope_of(kind: s.Kind, obj: Mapping[str, Any], *,
             cluster_owners: Mapping[tuple[str, str], Route] | None = None) -> str:
    """The subject scope of an object (subjects.object_subject): for a RayCluster, the RayJob or
    RayService owning it; for a Pod, its cluster's (KubeRay does not label Pods with their
    origin, so the watcher's cluster -> owner map decides); else none."""
    owner: Route | None = None
    if kind is s.Kind.RAYCLUSTER:
        owner = cluster_owner(obj)
    elif kind is s.Kind.POD:
        m = meta(obj)
        cluster = (m.get("labels") or {}).get(CLUSTER_LABEL)
        if cluster:
            owner = (cluster_owners or {}).get((str(m.get("namespace") or ""), str(cluster)))
    return _OWNER_SCOPES.get(owner.controller, s.NO_SCOPE) if owner is not None else s.NO_SCOPE


def msg_id(kind: s.Kind, obj: Mapping[str, Any], *, event_type: str) -> str:
    """JetStream de-dup id: two watcher replicas seeing the same version store it once."""
    m = meta(obj)
    suffix = "/DELETED" if event_type == "DELETED" else ""
    return f"{kind.value}/{m.get('namespace', '')}/{m.get('name', '')}/{m.get('resourceVersion', '')}{suffix}"


