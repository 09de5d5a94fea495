"""Verdicts, refusal reasons and the live view admission judges against (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

Json = Mapping[str, Any]

# Refusal reasons (bounded set: they label raybus_commands_refused_total).
UNKNOWN_CONTROLLER = "unknown_controller"
OBJECT_NOT_LIVE = "object_not_live"
# The batch names an incarnation the API server deleted: a reconcile that raced the deletion (or a
# replay). Refused like any other (creates owned by a dead uid would live until the garbage
# collector came), under its own reason so a forged batch stands out from this routine race.
OBJECT_DELETED = "object_deleted"
NAMESPACE = "foreign_namespace"
KIND = "kind_not_allowed"
OWNER = "not_owned"
# A created object differs from what the decision code builds from the live owner and the
# operator settings (a forged Pod spec, Service, Role, ...), or a patch changes what the decision
# code never changes.
NOT_BUILT = "not_built"
PATCH_CONTENT = "patch_content"
FOREIGN_TARGET = "foreign_target"
FOREIGN_STATUS = "foreign_status"
MALFORMED = "malformed"
# Routine races, logged at INFO rather than as a possible forgery.
ROUTINE = frozenset({OBJECT_DELETED})


class LiveView(Protocol):
    """What the API server holds, as the executor's own informers saw it: the Ray objects whole,
    the objects it may delete or patch at least with their metadata; and uids seen deleted."""

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

    @classmethod
    def of(cls, *objects: Json, gone: frozenset[str] = frozenset()) -> StaticView:
        return cls(objects={(str(o["kind"]), str(meta(o).get("namespace") or ""), str(meta(o).get("name") or "")): o
                            for o in objects}, gone_uids=gone)


@dataclass(frozen=True)
class Verdict:
    admitted: bool
    reason: str = ""  # one of the constants above
    detail: str = ""  # kinds, names, uids: never manifest bodies
    # The view may be behind (the Ray object, an owned object, or the owner's version the batch
    # was decided on not seen yet): look again later, refuse only when it stays so.
    retry: bool = False


ADMIT = Verdict(admitted=True)


class Refused(Exception):
    def __init__(self, reason: str, detail: str, *, retry: bool = False) -> None:
        super().__init__(detail)
        self.verdict = Verdict(admitted=False, reason=reason, detail=detail, retry=retry)


def meta(obj: Json) -> Json:
    m = obj.get("metadata")
    return m if isinstance(m, Mapping) else {}


def uid_of(obj: Json) -> str:
    return str(meta(obj).get("uid") or "")


def where(kind: str, namespace: str, name: str) -> str:
    return f"{kind} {namespace}/{name}"


def owned_by(obj: Json, kind: str, name: str, uid: str) -> bool:
    """An ownerReference of `obj` names the Ray object `kind` name/uid."""
    refs = meta(obj).get("ownerReferences") or []
    return bool(uid) and any(
        isinstance(r, Mapping) and str(r.get("apiVersion", "")).startswith("ray.io/") and r.get("kind") == kind
        and r.get("name") == name and r.get("uid") == uid for r in refs)


def older(live_rv: str, batch_rv: str | None) -> bool:
    """The live copy predates the version the batch was decided on, so the view is behind and the
    batch should be looked at again. resourceVersions are etcd revisions on every API server raybus
    runs against; anything that does not parse as one is never called older."""
    return bool(batch_rv) and live_rv.isdigit() and str(batch_rv).isdigit() and int(live_rv) < int(str(batch_rv))
