"""What `raybus_sim --apiserver-kubeconfig` sets up on a real cluster before its node starts, through
the API with the admin's kubeconfig, as an admin installing raybus would: the CRDs of
`--crd-dir` (waiting until they are Established), the RBAC kinds of `--rbac-manifest` (the
Namespace, ServiceAccounts, ClusterRoles and bindings of deploy/), and one kubeconfig per
`--sa-kubeconfig NS/SA=PATH` holding a TokenRequest token of that ServiceAccount, so the services
using it are held to exactly the RBAC of the install."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import yaml

from raybus.adapters.kube import KubeClient, KubeError, Resource, new_api_client

CRD = Resource(group="apiextensions.k8s.io", version="v1", plural="customresourcedefinitions",
               kind="CustomResourceDefinition", namespaced=False)
SERVICE_ACCOUNT = Resource(group="", version="v1", plural="serviceaccounts", kind="ServiceAccount")
RBAC_KINDS = {"Namespace": ("", "namespaces", False), "ServiceAccount": ("", "serviceaccounts", True),
              "ClusterRole": ("rbac.authorization.k8s.io", "clusterroles", False),
              "ClusterRoleBinding": ("rbac.authorization.k8s.io", "clusterrolebindings", False),
              "Role": ("rbac.authorization.k8s.io", "roles", True),
              "RoleBinding": ("rbac.authorization.k8s.io", "rolebindings", True)}
TOKEN_SECONDS = 7 * 24 * 3600  # outlives any test session or `raybus up`


async def _apply(client: KubeClient, res: Resource, doc: dict[str, Any]) -> None:
    """Create, or replace what an earlier run left (RBAC and CRDs follow the checkout)."""
    ns = (doc.get("metadata") or {}).get("namespace") if res.namespaced else None
    try:
        await client.create(res, doc, namespace=ns)
    except KubeError as err:
        if not err.already_exists:
            raise
        if res.plural in ("namespaces", "serviceaccounts"):
            return  # nothing of theirs to bring up to date
        name = doc["metadata"]["name"]
        cur = await client.get(res, namespace=ns, name=name)
        body = dict(doc, metadata=dict(doc["metadata"], resourceVersion=cur["metadata"]["resourceVersion"]))
        await client.request("PUT", res.path(namespace=ns, name=name), body=body)


async def _wait(check: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if await check():
                return
        except KubeError:
            pass
        await asyncio.sleep(0.1)
    raise TimeoutError(f"{what} not there after {timeout}s")


async def install_crds(client: KubeClient, crd_dir: Path) -> None:
    """Server-side apply (the CRDs' full schemas are far over client-side apply's annotation limit),
    taking over fields an earlier install wrote."""
    names = []
    for path in sorted(crd_dir.glob("*.y*ml")):
        # libyaml: a full-schema CRD is 0.5-0.8 MB of YAML
        for doc in yaml.load_all(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                await client.server_side_apply(CRD, doc, namespace=None, field_manager="raybus-install", force=True)
                names.append(doc["metadata"]["name"])

    async def established() -> bool:
        for name in names:
            conds = (await client.get(CRD, namespace=None, name=name)).get("status", {}).get("conditions") or []
            if not any(c.get("type") == "Established" and c.get("status") == "True" for c in conds):
                return False
        return True

    await _wait(established, "CRDs Established")


async def apply_rbac(client: KubeClient, manifest: Path) -> None:
    for doc in yaml.safe_load_all(manifest.read_text()):
        if isinstance(doc, dict) and doc.get("kind") in RBAC_KINDS:
            group, plural, namespaced = RBAC_KINDS[doc["kind"]]
            res = Resource(group=group, version="v1", plural=plural, kind=doc["kind"], namespaced=namespaced)
            await _apply(client, res, doc)


async def service_account_kubeconfig(client: KubeClient, admin_kubeconfig: str, namespace: str, name: str,
                                     path: Path) -> None:
    """The admin kubeconfig's cluster (server, CA) with a TokenRequest token of namespace/name."""
    answer = await client.request("POST", SERVICE_ACCOUNT.path(namespace=namespace, name=name, subresource="token"),
                                  body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                        "spec": {"expirationSeconds": TOKEN_SECONDS}})
    token = answer["status"]["token"]
    cfg = yaml.safe_load(Path(admin_kubeconfig).read_text())
    context = next(c for c in cfg["contexts"] if c["name"] == cfg["current-context"])
    cluster = next(c for c in cfg["clusters"] if c["name"] == context["context"]["cluster"])
    out = {"apiVersion": "v1", "kind": "Config", "current-context": "sa", "preferences": {},
           "clusters": [dict(cluster, name="sa")],
           "users": [{"name": "sa", "user": {"token": token}}],
           "contexts": [{"name": "sa", "context": {"cluster": "sa", "user": "sa", "namespace": "default"}}]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(out, sort_keys=False))
    path.chmod(0o600)


async def prepare(admin_kubeconfig: str, *, crd_dir: Path, rbac_manifest: Path | None,
                  sa_kubeconfigs: list[str]) -> None:
    client = KubeClient(await new_api_client(admin_kubeconfig))
    try:
        await install_crds(client, crd_dir)
        if rbac_manifest is not None:
            await apply_rbac(client, rbac_manifest)
        for spec in sa_kubeconfigs:  # ns/serviceaccount=path
            who, _, path = spec.partition("=")
            namespace, _, name = who.partition("/")
            await service_account_kubeconfig(client, admin_kubeconfig, namespace, name, Path(path))

        async def default_sa() -> bool:  # the ServiceAccount controller's; Pods need it
            await client.get(SERVICE_ACCOUNT, namespace="default", name="default")
            return True

        await _wait(default_sa, "ServiceAccount default/default")
    finally:
        await client.close()
