"""Executor admission: may the command-executor apply this command batch?

The executor holds KubeRay's write power, and the bus that brings it batches can be written by
anyone holding a reconciler's password. So a batch is applied only if a reconciler's decision code
could have produced it from what the API server holds (the executor's own informers, never the
bus), with the operator settings the reconcilers run with:

- only the kinds that controller creates, patches or deletes, in the namespace of its Ray object,
  and that object exists with the batch's uid;
- a created object equals what the decision code builds for the live owner (cluster_builds,
  owner_builds), but for the exempt fields (exempt.py);
- a delete or patch targets an object the batch's Ray object owns in the API server (or its own
  Ray object, or a RayCluster it owns), and a patch changes only what the decision code changes
  (patches.py);
- status writes and Events only for the batch's own object.

The view may trail the reconciler's (a RayCluster a RayJob just created; a status write the owner's
next step read), so a batch the view cannot judge yet is `retry`: the executor looks again for a
bounded time and refuses only then. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from raybus.decisions.admission import verdict as v
from raybus.decisions.admission.cluster_builds import check_cluster_create
from raybus.decisions.admission.owner_builds import check_job_create, check_service_create
from raybus.decisions.admission.patches import (
    RAY_KINDS,
    Owner,
    check_owned_patch,
    check_owned_target,
    check_pod_patch,
    check_ray_patch,
)
from raybus.decisions.cluster import labels as k
from raybus.decisions.cluster.batch_scheduler import (
    SCHEDULER_PLUGINS_POD_GROUP_API_VERSION,
    VOLCANO_POD_GROUP_API_VERSION,
)
from raybus.decisions.commands import (
    Command,
    CreateObject,
    DeleteObject,
    ObjectRef,
    PatchObject,
    RecordEvent,
    UpdateStatus,
)
from raybus.decisions.rayservice.constants import GATEWAY_API_VERSION
from raybus.decisions.settings import DecisionSettings

Json = v.Json
RAY = "ray.io/v1"
RBAC = "rbac.authorization.k8s.io/v1"
NET = "networking.k8s.io/v1"

# controller token -> (batch kind token, Kubernetes kind of its Ray object)
PRIMARY: dict[str, tuple[str, str]] = {
    "cluster": ("raycluster", "RayCluster"),
    "job": ("rayjob", "RayJob"),
    "service": ("rayservice", "RayService"),
}
# (apiVersion, kind) each controller's decision code creates.
CREATES: dict[str, frozenset[tuple[str, str]]] = {
    "cluster": frozenset({
        ("v1", "Pod"), ("v1", "Service"), ("v1", "ServiceAccount"), ("v1", "Secret"),
        (RBAC, "Role"), (RBAC, "RoleBinding"), (NET, "Ingress"), (NET, "NetworkPolicy"),
        ("batch/v1", "Job"), (VOLCANO_POD_GROUP_API_VERSION, "PodGroup"),
        (SCHEDULER_PLUGINS_POD_GROUP_API_VERSION, "PodGroup"),
    }),
    "job": frozenset({(RAY, "RayCluster"), ("v1", "Service"), ("batch/v1", "Job")}),
    "service": frozenset({(RAY, "RayCluster"), ("v1", "Service"), (GATEWAY_API_VERSION, "Gateway"),
                          (GATEWAY_API_VERSION, "HTTPRoute")}),
}
# Kinds each controller patches / deletes (Ray kinds are further limited to its own or owned ones).
PATCHES: dict[str, frozenset[str]] = {
    "cluster": frozenset({"RayCluster", "Pod", "Ingress", "PodGroup", "NetworkPolicy"}),
    "job": frozenset({"RayJob", "RayCluster", "Service"}),
    # its own RayService: ray.io/rayservice-finalizer (KubeRay v1.7, #4807)
    "service": frozenset({"RayService", "RayCluster", "Service", "Pod", "Gateway", "HTTPRoute"}),
}
DELETES: dict[str, frozenset[str]] = {
    "cluster": frozenset({"Pod", "NetworkPolicy"}),
    "job": frozenset({"RayJob", "RayCluster", "Job"}),
    "service": frozenset({"RayCluster", "Service", "Gateway", "HTTPRoute"}),
}
# Secret data keys the executor may generate: the auth token Secret's (auth_secret.py) only.
GENERATED_KEYS = (k.RAY_AUTH_TOKEN_SECRET_KEY,)
_DEFAULT_SETTINGS = DecisionSettings()


@dataclass(frozen=True)
class _Batch:
    controller: str
    kind: str  # Kubernetes kind of the Ray object
    namespace: str
    name: str
    live: Json  # the Ray object as the API server holds it
    view: v.LiveView
    settings: DecisionSettings
    resource_version: str | None  # the Ray object's version the batch was decided on

    @property
    def uid(self) -> str:
        return v.uid_of(self.live)

    def owned_cluster(self, name: str) -> Json:
        """A live RayCluster this RayJob/RayService owns (retry when not seen yet)."""
        cluster = self.view.get("RayCluster", self.namespace, name)
        if cluster is None:
            raise v.Refused(v.OBJECT_NOT_LIVE, f"RayCluster {self.namespace}/{name} not seen", retry=True)
        if not v.owned_by(cluster, self.kind, self.name, self.uid):
            raise v.Refused(v.FOREIGN_TARGET, f"RayCluster {self.namespace}/{name} is not owned by "
                            f"{self.kind} {self.namespace}/{self.name}")
        return cluster

    def any_cluster(self, name: str) -> Json:
        """A live RayCluster of the namespace, whoever owns it (a RayJob's clusterSelector)."""
        cluster = self.view.get("RayCluster", self.namespace, name)
        if cluster is None:
            raise v.Refused(v.OBJECT_NOT_LIVE, f"RayCluster {self.namespace}/{name} not seen", retry=True)
        return cluster

    def owner(self) -> Owner:
        return Owner(controller=self.controller, kind=self.kind, live=self.live, settings=self.settings,
                     lookup=self.view.get, owned_cluster=self.owned_cluster)

    def is_self(self, ref: ObjectRef) -> bool:
        return (ref.kind, ref.namespace, ref.name) == (self.kind, self.namespace, self.name)


def _check_namespace(b: _Batch, namespace: str, what: str) -> None:
    if namespace != b.namespace:
        raise v.Refused(v.NAMESPACE, f"{what} is in namespace {namespace!r}, the batch's "
                        f"{b.kind} is in {b.namespace!r}")


def _check_create(b: _Batch, cmd: CreateObject) -> None:
    obj = cmd.object
    api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
    name = str(v.meta(obj).get("name") or "")
    namespace = str(v.meta(obj).get("namespace") or b.namespace)
    what = v.where(kind or "?", namespace, name or "?")
    if (api_version, kind) not in CREATES[b.controller]:
        raise v.Refused(v.KIND, f"the {b.controller} controller never creates {api_version} {kind}")
    _check_namespace(b, namespace, what)
    if not name:
        raise v.Refused(v.MALFORMED, f"{kind} without metadata.name")
    if cmd.generated_data_keys and (kind != "Secret" or tuple(cmd.generated_data_keys) != GENERATED_KEYS):
        raise v.Refused(v.MALFORMED, f"generated data keys {list(cmd.generated_data_keys)} on {what}")
    if b.controller == "cluster":
        check_cluster_create(b.live, obj, b.settings.operator, what=what)
    elif b.controller == "job":
        check_job_create(b.live, obj, b.settings, b.owned_cluster, what=what, any_cluster=b.any_cluster)
    else:
        check_service_create(b.live, obj, b.settings, b.owned_cluster, what=what)


def _check_ray_target(b: _Batch, cmd: DeleteObject | PatchObject) -> None:
    """A Ray object is the batch's own, or (RayJob/RayService) a RayCluster it owns."""
    ref = cmd.target
    if b.is_self(ref):
        target = b.live
    elif ref.kind == "RayCluster" and b.controller in ("job", "service"):
        if ref.uid and b.view.gone(ref.uid):
            return  # that incarnation is gone: the delete or patch is a no-op (uid precondition)
        target = b.owned_cluster(ref.name)
    else:
        raise v.Refused(v.FOREIGN_TARGET, f"{cmd.op} of {v.where(ref.kind, ref.namespace, ref.name)}, neither "
                        f"the batch's {b.kind} nor a RayCluster it owns")
    if isinstance(cmd, PatchObject):
        check_ray_patch(b.owner(), cmd, target)


def _check_ref(b: _Batch, cmd: DeleteObject | PatchObject) -> None:
    ref = cmd.target
    allowed = PATCHES if isinstance(cmd, PatchObject) else DELETES
    if ref.kind not in allowed[b.controller]:
        raise v.Refused(v.KIND, f"the {b.controller} controller never {cmd.op}s {ref.kind}")
    _check_namespace(b, ref.namespace, v.where(ref.kind, ref.namespace, ref.name))
    if ref.kind in RAY_KINDS:
        _check_ray_target(b, cmd)
        return
    if isinstance(cmd, DeleteObject) and ref.uid and b.view.gone(ref.uid):
        return  # already gone: the uid precondition makes it a no-op
    live = check_owned_target(b.owner(), cmd)
    if live is None or not isinstance(cmd, PatchObject):
        return
    if ref.kind == "Pod":
        check_pod_patch(b.owner(), cmd)
    else:
        check_owned_patch(b.owner(), cmd, live)


def _check(b: _Batch, cmd: Command) -> None:
    try:
        if isinstance(cmd, CreateObject):
            _check_create(b, cmd)
        elif isinstance(cmd, DeleteObject | PatchObject):
            _check_ref(b, cmd)
        elif isinstance(cmd, UpdateStatus | RecordEvent):
            if not b.is_self(cmd.target):
                t = cmd.target
                raise v.Refused(v.FOREIGN_STATUS, f"{cmd.op} for {v.where(t.kind, t.namespace, t.name)}, not "
                                f"the batch's {b.kind} {b.namespace}/{b.name}")
        else:  # pragma: no cover - the Command union is closed
            raise v.Refused(v.MALFORMED, f"unknown op {getattr(cmd, 'op', '?')}")
    except v.Refused as refused:
        # Decided on a newer version of the Ray object than the view has: the view is behind.
        if refused.verdict.reason in (v.NOT_BUILT, v.PATCH_CONTENT) and \
                v.older(str(v.meta(b.live).get("resourceVersion") or ""), b.resource_version):
            raise v.Refused(refused.verdict.reason, refused.verdict.detail, retry=True) from None
        raise


def admit(*, controller: str, kind: str, namespace: str, name: str, uid: str | None,
          commands: Iterable[Command], view: v.LiveView, settings: DecisionSettings | None = None,
          resource_version: str | None = None) -> v.Verdict:
    """The verdict on one batch (CommandBatch fields); the first offending command decides."""
    primary = PRIMARY.get(controller)
    if primary is None or primary[0] != kind:
        return v.Verdict(admitted=False, reason=v.UNKNOWN_CONTROLLER,
                         detail=f"controller {controller!r} does not publish batches of kind {kind!r}")
    ray_kind = primary[1]
    live = view.get(ray_kind, namespace, name)
    if live is None or (uid and v.uid_of(live) != uid):
        if uid and view.gone(uid):
            return v.Verdict(admitted=False, reason=v.OBJECT_DELETED,
                             detail=f"{v.where(ray_kind, namespace, name)} uid {uid} was deleted")
        return v.Verdict(admitted=False, reason=v.OBJECT_NOT_LIVE, retry=True,
                         detail=f"{v.where(ray_kind, namespace, name)}" + (f" uid {uid}" if uid else "") + " not seen")
    batch = _Batch(controller=controller, kind=ray_kind, namespace=namespace, name=name, live=live, view=view,
                   settings=settings or _DEFAULT_SETTINGS, resource_version=resource_version)
    try:
        for cmd in commands:
            _check(batch, cmd)
    except v.Refused as refused:
        return refused.verdict
    return v.ADMIT


def live_kinds() -> Mapping[str, frozenset[str]]:
    """Kubernetes kinds admission looks up, by whether it needs them whole (Ray objects) or their
    metadata only (the objects it may delete or patch): what the executor's informers watch."""
    owned = set().union(*PATCHES.values(), *DELETES.values()) - RAY_KINDS
    return {"whole": RAY_KINDS, "metadata": frozenset(owned)}
