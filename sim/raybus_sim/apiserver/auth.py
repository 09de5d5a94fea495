"""Authentication (bearer tokens) and RBAC authorization, as kube-apiserver does with --authorization-mode=RBAC.

- The admin token (write_kubeconfig's, or no Authorization header at all) is a cluster-admin
  (group system:masters) and skips every check: no per-request cost for it.
- ServiceAccount tokens (TokenRequest API `POST .../serviceaccounts/<sa>/token`, or
  `mint_token`) are HMAC-signed JWTs for `system:serviceaccount:<ns>:<sa>`, valid while that
  ServiceAccount (same uid) exists; anything else is 401 Unauthorized.
- Requests by ServiceAccounts are authorized against Roles/ClusterRoles bound by RoleBindings/
  ClusterRoleBindings (rbac/v1 semantics; resolved rules cached until an RBAC object changes).
- Escalation prevention (rbac registry): creating/updating a Role or ClusterRole needs every granted
  rule to be held, or the `escalate` verb; a binding needs the role's rules held, or `bind` on it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import errors
from .gofmt import q_slice, quote
from .rbac_rules import Rule, compact_string, covers, rule_allows

if TYPE_CHECKING:
    from .store import Event, Store

ADMIN_TOKEN = "raybus-sim"
RBAC_GROUP = "rbac.authorization.k8s.io"
_RBAC_KINDS = {"roles": "Role", "clusterroles": "ClusterRole", "rolebindings": "RoleBinding",
               "clusterrolebindings": "ClusterRoleBinding"}
# What bootstrap policy grants every authenticated user (system:basic-user / system:discovery).
_AUTHENTICATED_RULES: tuple[Rule, ...] = (
    {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
     "verbs": ["create"]},
    {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
)


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...]
    admin: bool = False


ADMIN = User("kubernetes-admin", ("system:masters", "system:authenticated"), admin=True)


@dataclass(frozen=True)
class Attributes:
    """authorizer.Attributes of a resource request."""

    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str

    def forbidden(self, user: User) -> errors.ApiError:
        res = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        scope = f'in the namespace "{self.namespace}"' if self.namespace else "at the cluster scope"
        why = (f'User "{user.name}" cannot {self.verb} resource "{res}" in API group "{self.group}" {scope}')
        qualified = f"{self.resource}.{self.group}" if self.group else self.resource
        text = f'{qualified} "{self.name}" is forbidden: {why}' if self.name else f"{qualified} is forbidden: {why}"
        details: dict[str, Any] = {"name": self.name} if self.name else {}
        if self.group:
            details["group"] = self.group
        details["kind"] = self.resource
        return errors.ApiError(403, "Forbidden", text, details)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Authenticator:
    def __init__(self, store: Store, *, key: bytes | None = None) -> None:
        self.store = store
        self._key = key or os.urandom(32)
        self._verified: dict[str, tuple[str, str, str, float]] = {}

    def mint(self, namespace: str, name: str, *, expiration_s: int = 3600) -> tuple[str, int]:
        """A signed token for the ServiceAccount namespace/name (which must exist); (token, expiry)."""
        sa_rt = self.store.registry.get("", "v1", "serviceaccounts")
        assert sa_rt is not None
        sa = self.store.get(sa_rt, namespace, name)
        now = int(time.time())
        claims = {"aud": ["https://kubernetes.default.svc"], "exp": now + expiration_s, "iat": now,
                  "iss": "https://kubernetes.default.svc", "sub": f"system:serviceaccount:{namespace}:{name}",
                  "kubernetes.io": {"namespace": namespace, "serviceaccount": {
                      "name": name, "uid": sa["metadata"]["uid"]}}}
        signing = _b64(json.dumps({"alg": "HS256", "kid": "raybus-sim"}).encode()) + "." + _b64(
            json.dumps(claims, separators=(",", ":")).encode())
        sig = _b64(hmac.new(self._key, signing.encode(), hashlib.sha256).digest())
        return f"{signing}.{sig}", now + expiration_s

    def user(self, header: str | None) -> User | None:
        """None: not authenticated (401)."""
        if header is None:
            return ADMIN
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer":
            return None
        if token == ADMIN_TOKEN:
            return ADMIN
        hit = self._verified.get(token) or self._verify(token)
        if hit is None:
            return None
        ns, name, uid, exp = hit
        sa_rt = self.store.registry.get("", "v1", "serviceaccounts")
        sa = self.store.find(sa_rt, ns, name) if sa_rt else None
        if sa is None or sa["metadata"]["uid"] != uid or exp < time.time():
            return None
        return User(f"system:serviceaccount:{ns}:{name}",
                    ("system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"))

    def _verify(self, token: str) -> tuple[str, str, str, float] | None:
        parts = token.split(".")
        if len(parts) != 3:
            return None
        want = _b64(hmac.new(self._key, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest())
        if not hmac.compare_digest(want, parts[2]):
            return None
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        sa = claims["kubernetes.io"]
        hit = (sa["namespace"], sa["serviceaccount"]["name"], sa["serviceaccount"]["uid"], float(claims["exp"]))
        if len(self._verified) > 10000:
            self._verified.clear()
        self._verified[token] = hit
        return hit


class Authorizer:
    """RBAC: rules bound to a user, cached per (user, namespace) until any RBAC object changes."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._cache: dict[tuple[str, str], list[Rule]] = {}
        store.listeners.append(self._on_event)

    def _on_event(self, ev: Event) -> None:
        if ev.rt.group == RBAC_GROUP:
            self._cache.clear()

    def _rt(self, plural: str) -> Any:
        return self.store.registry.get(RBAC_GROUP, "v1", plural)

    @staticmethod
    def _applies(user: User, subject: dict[str, Any], namespace: str) -> bool:
        kind, name = subject.get("kind"), subject.get("name")
        if kind == "User":
            return user.name == name
        if kind == "Group":
            return name in user.groups
        if kind == "ServiceAccount":
            ns = subject.get("namespace") or namespace
            return bool(ns) and user.name == f"system:serviceaccount:{ns}:{name}"
        return False

    def role_rules(self, ref: dict[str, Any], namespace: str) -> list[Rule]:
        """GetRoleReferenceRules: the referenced role's rules; 404 when it does not exist."""
        if ref.get("kind") == "ClusterRole":
            role = self.store.get(self._rt("clusterroles"), "", ref.get("name", ""))
        else:
            role = self.store.get(self._rt("roles"), namespace, ref.get("name", ""))
        return list(role.get("rules") or [])

    def rules_for(self, user: User, namespace: str) -> list[Rule]:
        key = (user.name, namespace)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        rules: list[Rule] = list(_AUTHENTICATED_RULES)
        for crb in self.store.list(self._rt("clusterrolebindings"), None):
            if any(self._applies(user, s, "") for s in crb.get("subjects") or []):
                rules += self._safe_rules(crb.get("roleRef") or {}, "")
        if namespace:
            for rb in self.store.list(self._rt("rolebindings"), namespace):
                if any(self._applies(user, s, namespace) for s in rb.get("subjects") or []):
                    rules += self._safe_rules(rb.get("roleRef") or {}, namespace)
        self._cache[key] = rules
        return rules

    def _safe_rules(self, ref: dict[str, Any], namespace: str) -> list[Rule]:
        try:
            return self.role_rules(ref, namespace)
        except errors.ApiError:
            return []  # a binding to a missing role grants nothing

    def allowed(self, user: User, attrs: Attributes) -> bool:
        if user.admin:
            return True
        return any(rule_allows(rule, attrs.verb, attrs.group, attrs.resource, attrs.subresource, attrs.name)
                   for rule in self.rules_for(user, attrs.namespace))

    def check(self, user: User, attrs: Attributes) -> None:
        if not self.allowed(user, attrs):
            raise attrs.forbidden(user)

    # --- escalation prevention (pkg/registry/rbac/{role,clusterrole,rolebinding,...}/policybased) ---
    def _no_escalation(self, user: User, namespace: str, rules: list[Rule]) -> str | None:
        ok, missing = covers(self.rules_for(user, namespace), rules)
        if ok:
            return None
        listed = "\n".join(sorted({compact_string(r) for r in missing}))
        return (f"user {quote(user.name)} (groups={q_slice(list(user.groups))}) is attempting to grant RBAC "
                f"permissions not currently held:\n{listed}")

    def admit_rbac_write(self, user: User, plural: str, namespace: str, obj: dict[str, Any]) -> None:
        """Refuses (403) a Role/ClusterRole/binding write that would grant what the user does not hold."""
        if user.admin or plural not in _RBAC_KINDS:
            return
        name = str((obj.get("metadata") or {}).get("name") or "")
        if plural in ("roles", "clusterroles"):
            if self.allowed(user, Attributes("escalate", RBAC_GROUP, plural, "", namespace, "")):
                return
            why = self._no_escalation(user, namespace, list(obj.get("rules") or []))
        else:
            ref = obj.get("roleRef") or {}
            role_plural = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
            # BindingAuthorized: `bind` on the role, checked in the binding's namespace
            if self.allowed(user, Attributes("bind", RBAC_GROUP, role_plural, "", namespace,
                                             str(ref.get("name") or ""))):
                return
            why = self._no_escalation(user, namespace, self.role_rules(ref, namespace))
        if why is not None:
            details = {"name": name, "group": RBAC_GROUP, "kind": plural} if name else {
                "group": RBAC_GROUP, "kind": plural}
            text = f'{plural}.{RBAC_GROUP} "{name}" is forbidden: {why}'
            raise errors.ApiError(403, "Forbidden", text, details)
