"""Which resources the server serves: built-ins plus whatever CRDs are registered at runtime."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status_subresource: bool = False
    # Whether metadata.generation is maintained (set to 1, bumped on non-metadata/status changes).
    generation: bool = False
    custom: bool = False
    printer_columns: tuple[dict[str, Any], ...] = ()
    # Default DeleteOptions.propagationPolicy when the client sends none (batch/v1 Job orphans, as upstream).
    default_propagation: str = "Background"
    # CRD openAPIV3Schema for this version (pruning/defaulting/validation in schema.py).
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    # Storage shared with another resource (events.k8s.io events live with core events).
    storage: str | None = None

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def gr(self) -> str:
        """Storage key: one store per group+resource, independent of version."""
        if self.storage:
            return self.storage
        return f"{self.plural}.{self.group}" if self.group else self.plural


def _b(group: str, version: str, plural: str, kind: str, **kw: Any) -> ResourceType:
    return ResourceType(group=group, version=version, plural=plural, kind=kind, **kw)


BUILTINS: tuple[ResourceType, ...] = (
    _b("", "v1", "namespaces", "Namespace", namespaced=False, short_names=("ns",), status_subresource=True),
    _b("", "v1", "pods", "Pod", short_names=("po",), categories=("all",), status_subresource=True,
       generation=True),  # 1.33 maintains metadata.generation for pods
    _b("", "v1", "services", "Service", short_names=("svc",), categories=("all",), status_subresource=True),
    _b("", "v1", "serviceaccounts", "ServiceAccount", short_names=("sa",)),
    _b("", "v1", "events", "Event", short_names=("ev",)),
    _b("", "v1", "configmaps", "ConfigMap", short_names=("cm",)),
    _b("", "v1", "secrets", "Secret"),
    _b("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", short_names=("pvc",),
       status_subresource=True),
    _b("", "v1", "endpoints", "Endpoints", short_names=("ep",)),
    _b("batch", "v1", "jobs", "Job", categories=("all",), status_subresource=True, generation=True,
       default_propagation="Orphan"),
    _b("", "v1", "nodes", "Node", namespaced=False, short_names=("no",), status_subresource=True),
    _b("apps", "v1", "deployments", "Deployment", short_names=("deploy",), categories=("all",),
       status_subresource=True, generation=True),
    _b("apps", "v1", "statefulsets", "StatefulSet", short_names=("sts",), categories=("all",),
       status_subresource=True, generation=True),
    _b("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    _b("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    _b("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
    _b("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False),
    _b("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", short_names=("netpol",), generation=True),
    _b("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", short_names=("pdb",),
       status_subresource=True, generation=True),
    _b("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice"),
    _b("networking.k8s.io", "v1", "ingresses", "Ingress", short_names=("ing",), status_subresource=True,
       generation=True),
    _b("gateway.networking.k8s.io", "v1", "gateways", "Gateway", short_names=("gtw",), status_subresource=True,
       generation=True),
    _b("gateway.networking.k8s.io", "v1", "httproutes", "HTTPRoute", status_subresource=True, generation=True),
    _b("events.k8s.io", "v1", "events", "Event", short_names=("ev",), storage="events"),
    _b("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
       namespaced=False, short_names=("crd", "crds"), status_subresource=True, generation=True),
    _b("coordination.k8s.io", "v1", "leases", "Lease"),
)


def crd_resource_types(crd: dict[str, Any]) -> list[ResourceType]:
    """One ResourceType per served version of a CRD (spec.versions[].served)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    out: list[ResourceType] = []
    for ver in spec.get("versions") or []:
        if not ver.get("served", True):
            continue
        subresources = ver.get("subresources") or {}
        out.append(ResourceType(
            group=spec["group"], version=ver["name"], plural=names["plural"], kind=names["kind"],
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            short_names=tuple(names.get("shortNames") or ()), categories=tuple(names.get("categories") or ()),
            status_subresource="status" in subresources, generation=True, custom=True,
            printer_columns=tuple(ver.get("additionalPrinterColumns") or ()),
            schema=(ver.get("schema") or {}).get("openAPIV3Schema"),
        ))
    return out


@dataclass
class Registry:
    """Lookup by (group, version, plural); versions of one CRD share storage via ResourceType.gr."""

    by_path: dict[tuple[str, str, str], ResourceType] = field(default_factory=dict)
    # gr -> name of the CRD that registered it, so deleting the CRD unregisters it.
    crd_owned: dict[str, str] = field(default_factory=dict)

    def add(self, rt: ResourceType) -> None:
        self.by_path[(rt.group, rt.version, rt.plural)] = rt

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self.by_path.get((group, version, plural))

    def by_gr(self, gr: str) -> list[ResourceType]:
        return [rt for rt in self.by_path.values() if rt.gr == gr]

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        for rt in self.by_path.values():
            if rt.kind == kind and rt.api_version == api_version:
                return rt
        return None

    def add_crd(self, crd: dict[str, Any]) -> list[ResourceType]:
        self.remove_crd(crd["metadata"]["name"])
        rts = crd_resource_types(crd)
        for rt in rts:
            self.add(rt)
            self.crd_owned[rt.gr] = crd["metadata"]["name"]
        return rts

    def remove_crd(self, crd_name: str) -> None:
        grs = {gr for gr, name in self.crd_owned.items() if name == crd_name}
        for key, rt in list(self.by_path.items()):
            if rt.gr in grs and rt.custom:
                del self.by_path[key]
        for gr in grs:
            del self.crd_owned[gr]

    def groups(self) -> dict[str, list[str]]:
        """group -> versions, in registration order (first is preferred)."""
        out: dict[str, list[str]] = {}
        for rt in self.by_path.values():
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        return out


def new_registry() -> Registry:
    reg = Registry()
    for rt in BUILTINS:
        reg.add(rt)
    return reg
