"""Executor admission (issue 18): may the command-executor apply this command batch?

The executor holds KubeRay's write power (create Pods, Secrets, Roles, RoleBindings in every
namespace), yet anyone who can publish on `raybus.cmd.>` could otherwise make it create anything.
This policy is derived from what the reconcilers' decision code produces, and a batch is admitted
only if a reconciler could have produced it:

- only the kinds that controller creates / patches / deletes (tables below, from the decision
  code: cluster/owned.py, rbac.py, auth_secret.py, services.py, network_policy.py,
  batch_scheduler.py, redis_cleanup.py; job/resources.py, submitter.py; service/ray_cluster.py,
  services.py, incremental.py, suspend.py, cleanup.py);
- only in the namespace of the batch's Ray object;
- every created object owned (ownerReference uid) by the batch's live Ray object, or, for a
  RayService's per-cluster serve Service, by a live RayCluster that the RayService owns;
- Pods labelled `ray.io/cluster` of that RayCluster;
- Secrets without values (the executor generates the auth token, auth_secret.py);
- Roles only with the autoscaler's rule set (rbac.AUTOSCALER_RULES), RoleBindings only binding that
  Role to the cluster's autoscaler ServiceAccount; ServiceAccounts only under that name;
- patches of Pods touch metadata only (labels/annotations: KubeRay's serve label and Recreate hash);
- a Ray object is patched/deleted only if it is the batch's own or a RayCluster it owns;
- status writes and Events only for the batch's own object.

"Live" objects come from the executor's watch of the objects stream (no API GET per batch). The
view may trail the reconciler's by a few messages (a RayCluster a RayJob just created), so a batch
whose Ray object is not in the view yet is `retry` rather than refused: the executor looks again
for a bounded time and refuses only then. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import ValidationError

from raybus.api.raycluster import RayCluster
from raybus.decisions.cluster import labels as k
from raybus.decisions.cluster.batch_scheduler import (
    SCHEDULER_PLUGINS_POD_GROUP_API_VERSION,
    VOLCANO_POD_GROUP_API_VERSION,
)
from raybus.decisions.cluster.rbac import (
    AUTOSCALER_RULES,
    autoscaler_role_name,
    autoscaler_service_account_name,
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
from raybus.decisions.service.constants import GATEWAY_API_VERSION

Json = Mapping[str, Any]
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
RAY_KINDS = frozenset({"RayCluster", "RayJob", "RayService"})
# Merge-patch keys a Pod patch may carry: KubeRay only relabels/re-annotates Pods; the uid and
# resourceVersion are preconditions. Anything else (an image, a command) is not a reconciler's.
POD_PATCH_METADATA = frozenset({"labels", "annotations", "uid", "resourceVersion"})

# Refusal reasons (bounded set: they label raybus_commands_refused_total).
UNKNOWN_CONTROLLER = "unknown_controller"
OBJECT_NOT_LIVE = "object_not_live"
# The batch names an incarnation the watch saw deleted: a reconcile that raced the deletion (or a
# replay). Refused like any other (creates owned by a dead uid would live until the garbage
# collector came), under its own reason so a forged batch stands out from this routine race.
OBJECT_DELETED = "object_deleted"
NAMESPACE = "foreign_namespace"
KIND = "kind_not_allowed"
OWNER = "not_owned"
POD_LABEL = "pod_label"
RBAC_RULES = "rbac_rules"
FOREIGN_TARGET = "foreign_target"
FOREIGN_STATUS = "foreign_status"
POD_PATCH = "pod_patch_spec"
MALFORMED = "malformed"


class LiveView(Protocol):
    """What the executor's watch knows: the current Ray objects, and uids seen deleted."""

    def get(self, kind: str, namespace: str, name: str) -> Json | None: ...

    def gone(self, uid: str) -> bool: ...


@dataclass(frozen=True)
class StaticView:
    """A LiveView over plain data (tests, and `raybus` tooling)."""

    objects: Mapping[tuple[str, str, str], Json] = field(default_factory=dict)  # (Kind, ns, name)
    gone_uids: frozenset[str] = frozenset()

    def get(self, kind: str, namespace: str, name: str) -> Json | None:
        return self.objects.get((kind, namespace, name))

    def gone(self, uid: str) -> bool:
        return uid in self.gone_uids


@dataclass(frozen=True)
class Verdict:
    admitted: bool
    reason: str = ""  # one of the constants above
    detail: str = ""  # kinds, names, uids: never manifest bodies
    # The view may be behind (the Ray object or an owned RayCluster not seen yet): look again
    # later, refuse only when it stays so.
    retry: bool = False


ADMIT = Verdict(admitted=True)


class _Refused(Exception):
    def __init__(self, reason: str, detail: str, *, retry: bool = False) -> None:
        super().__init__(detail)
        self.verdict = Verdict(admitted=False, reason=reason, detail=detail, retry=retry)


def _meta(obj: Json) -> Json:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _uid(obj: Json) -> str:
    return str(_meta(obj).get("uid") or "")


def _owned_by(obj: Json, kind: str, name: str, uid: str) -> bool:
    refs = _meta(obj).get("ownerReferences") or []
    return bool(uid) and any(
        isinstance(r, Mapping) and str(r.get("apiVersion", "")).startswith("ray.io/") and r.get("kind") == kind
        and r.get("name") == name and r.get("uid") == uid for r in refs)


@dataclass(frozen=True)
class _Batch:
    controller: str
    kind: str  # Kubernetes kind of the Ray object
    namespace: str
    name: str
    live: Json  # the Ray object as the view has it
    view: LiveView

    @property
    def uid(self) -> str:
        return _uid(self.live)

    def owned_cluster(self, name: str) -> Json:
        """A live RayCluster this RayJob/RayService owns (retry when not seen yet)."""
        cluster = self.view.get("RayCluster", self.namespace, name)
        if cluster is None:
            raise _Refused(OBJECT_NOT_LIVE, f"RayCluster {self.namespace}/{name} not seen", retry=True)
        if not _owned_by(cluster, self.kind, self.name, self.uid):
            raise _Refused(FOREIGN_TARGET, f"RayCluster {self.namespace}/{name} is not owned by "
                           f"{self.kind} {self.namespace}/{self.name}")
        return cluster

    def is_self(self, ref: ObjectRef) -> bool:
        return (ref.kind, ref.namespace, ref.name) == (self.kind, self.namespace, self.name)


def _where(kind: str, namespace: str, name: str) -> str:
    return f"{kind} {namespace}/{name}"


def _check_namespace(b: _Batch, namespace: str, what: str) -> None:
    if namespace != b.namespace:
        raise _Refused(NAMESPACE, f"{what} is in namespace {namespace!r}, the batch's "
                       f"{b.kind} is in {b.namespace!r}")


def _cluster_model(raw: Json) -> RayCluster:
    try:
        return RayCluster.model_validate(dict(raw))
    except ValidationError:
        raise _Refused(MALFORMED, "the live RayCluster does not parse") from None


def _normal_rules(rules: Iterable[Any]) -> list[tuple[tuple[str, tuple[str, ...]], ...]]:
    out = []
    for rule in rules:
        if not isinstance(rule, Mapping):
            return [(("invalid", ()),)]
        out.append(tuple(sorted((str(key), tuple(sorted(map(str, value))) if isinstance(value, list)
                                 else (str(value),)) for key, value in rule.items())))
    return sorted(out)


def _check_rbac(b: _Batch, obj: Json, kind: str, name: str) -> None:
    """Only the autoscaler's ServiceAccount, Role (its rule set) and RoleBinding (that Role to that
    ServiceAccount), under the names reconcileAutoscaler* give them."""
    cluster = _cluster_model(b.live)
    role, account = autoscaler_role_name(cluster), autoscaler_service_account_name(cluster)
    if kind == "ServiceAccount":
        if name != account:
            raise _Refused(RBAC_RULES, f"ServiceAccount {name} is not the autoscaler's ({account})")
        return
    if name != role:
        raise _Refused(RBAC_RULES, f"{kind} {name} is not the autoscaler's ({role})")
    if kind == "Role":
        if _normal_rules(obj.get("rules") or []) != _normal_rules(AUTOSCALER_RULES):
            raise _Refused(RBAC_RULES, f"Role {name} has rules other than the autoscaler's")
        return
    want_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role}
    want_subjects = [{"kind": "ServiceAccount", "name": account, "namespace": b.namespace}]
    ref = obj.get("roleRef")
    if not isinstance(ref, Mapping) or dict(ref) != want_ref or obj.get("subjects") != want_subjects:
        raise _Refused(RBAC_RULES, f"RoleBinding {name} does not bind Role {role} to ServiceAccount {account}")


def _check_create(b: _Batch, cmd: CreateObject) -> None:
    obj = cmd.object
    api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
    meta = _meta(obj)
    name = str(meta.get("name") or "")
    namespace = str(meta.get("namespace") or b.namespace)
    what = _where(kind or "?", namespace, name or "?")
    if (api_version, kind) not in CREATES[b.controller]:
        raise _Refused(KIND, f"the {b.controller} controller never creates {api_version} {kind}")
    _check_namespace(b, namespace, what)
    if not name:
        raise _Refused(MALFORMED, f"{kind} without metadata.name")
    if cmd.generated_data_keys and kind != "Secret":
        raise _Refused(MALFORMED, f"generated data keys on a {kind}")
    owners = _meta(obj).get("ownerReferences") or []
    if not _owned_by(obj, b.kind, b.name, b.uid):
        # A RayService's per-cluster serve Service is owned by the RayCluster it fronts.
        cluster_refs = [r for r in owners if isinstance(r, Mapping) and r.get("kind") == "RayCluster"]
        if not (b.controller == "service" and kind == "Service" and cluster_refs):
            raise _Refused(OWNER, f"{what} is not owned by {b.kind} {b.namespace}/{b.name} "
                           f"(uid {b.uid})")
        cluster_name = str(cluster_refs[0].get("name") or "")
        cluster = b.owned_cluster(cluster_name)
        if not _owned_by(obj, "RayCluster", cluster_name, _uid(cluster)):
            raise _Refused(OWNER, f"{what} is not owned by the live RayCluster {cluster_name}")
    if kind == "Pod":
        labels = meta.get("labels") if isinstance(meta.get("labels"), Mapping) else {}
        if (labels or {}).get(k.RAY_CLUSTER_LABEL_KEY) != b.name:
            raise _Refused(POD_LABEL, f"{what} is not labelled {k.RAY_CLUSTER_LABEL_KEY}={b.name}")
    if kind in ("Role", "RoleBinding", "ServiceAccount"):
        _check_rbac(b, obj, kind, name)
    if kind == "Secret" and (obj.get("data") or obj.get("stringData") or obj.get("type", "Opaque") != "Opaque"):
        # The only Secret a reconciler creates is the auth token one, whose value the executor
        # generates (auth_secret.py): a Secret with values (or a service-account token type) is forged.
        raise _Refused(MALFORMED, f"{what} carries values or a type other than Opaque")


def _check_ray_target(b: _Batch, ref: ObjectRef, op: str) -> None:
    """A Ray object is the batch's own, or (RayJob/RayService) a RayCluster it owns."""
    if b.is_self(ref):
        return
    if ref.kind == "RayCluster" and b.controller in ("job", "service"):
        if op == "delete" and ref.uid and b.view.gone(ref.uid):
            return  # that incarnation is gone: the delete is a no-op (404 / precondition)
        b.owned_cluster(ref.name)
        return
    raise _Refused(FOREIGN_TARGET, f"{op} of {_where(ref.kind, ref.namespace, ref.name)}, neither the batch's "
                   f"{b.kind} nor a RayCluster it owns")


def _check_ref(b: _Batch, cmd: DeleteObject | PatchObject) -> None:
    ref = cmd.target
    what = _where(ref.kind, ref.namespace, ref.name)
    allowed = PATCHES if isinstance(cmd, PatchObject) else DELETES
    if ref.kind not in allowed[b.controller]:
        raise _Refused(KIND, f"the {b.controller} controller never {cmd.op}s {ref.kind}")
    _check_namespace(b, ref.namespace, what)
    if ref.kind in RAY_KINDS:
        _check_ray_target(b, ref, cmd.op)
    if isinstance(cmd, PatchObject) and ref.kind == "Pod":
        meta = cmd.merge_patch.get("metadata")
        if set(cmd.merge_patch) - {"metadata"} or (
                meta is not None and (not isinstance(meta, Mapping) or set(meta) - POD_PATCH_METADATA)):
            raise _Refused(POD_PATCH, f"patch of {what} touches more than its labels/annotations")


def _check(b: _Batch, cmd: Command) -> None:
    if isinstance(cmd, CreateObject):
        _check_create(b, cmd)
    elif isinstance(cmd, DeleteObject | PatchObject):
        _check_ref(b, cmd)
    elif isinstance(cmd, UpdateStatus | RecordEvent):
        if not b.is_self(cmd.target):
            t = cmd.target
            raise _Refused(FOREIGN_STATUS, f"{cmd.op} for {_where(t.kind, t.namespace, t.name)}, not the "
                           f"batch's {b.kind} {b.namespace}/{b.name}")
    else:  # pragma: no cover - the Command union is closed
        raise _Refused(MALFORMED, f"unknown op {getattr(cmd, 'op', '?')}")


def admit(*, controller: str, kind: str, namespace: str, name: str, uid: str | None,
          commands: Iterable[Command], view: LiveView) -> Verdict:
    """The verdict on one batch (CommandBatch fields); the first offending command decides."""
    primary = PRIMARY.get(controller)
    if primary is None or primary[0] != kind:
        return Verdict(admitted=False, reason=UNKNOWN_CONTROLLER,
                       detail=f"controller {controller!r} does not publish batches of kind {kind!r}")
    ray_kind = primary[1]
    live = view.get(ray_kind, namespace, name)
    if live is None or (uid and _uid(live) != uid):
        if uid and view.gone(uid):
            return Verdict(admitted=False, reason=OBJECT_DELETED,
                           detail=f"{_where(ray_kind, namespace, name)} uid {uid} was deleted")
        return Verdict(admitted=False, reason=OBJECT_NOT_LIVE, retry=True,
                       detail=f"{_where(ray_kind, namespace, name)}" + (f" uid {uid}" if uid else "") + " not seen")
    batch = _Batch(controller=controller, kind=ray_kind, namespace=namespace, name=name, live=live, view=view)
    try:
        for cmd in commands:
            _check(batch, cmd)
    except _Refused as refused:
        return refused.verdict
    return ADMIT
