"""The real command-executor with its ServiceAccount's token (deploy/kustomize/base/rbac.yaml's RBAC enforced by
the local API server) applies what the cluster decisions create for KubeRay's autoscaler sample: the
autoscaler ServiceAccount, Role (granting pods/resize patch), RoleBinding, Services and Pods. With a
ClusterRole lacking pods/resize the Role is refused with the real server's 403 (issue 9 item 2)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import nats
import pytest
import yaml
from nats.js import JetStreamContext

from command_executor.app import CommandExecutorService, ExecutorSettings
from raybus.adapters.kube import KubeClient, KubeError, Resource, new_api_client, resource_for
from raybus.api.raycluster import RayCluster
from raybus.bus import subjects as s
from raybus.bus.envelopes import CommandBatch, ObjectKey, Outcome
from raybus.bus.publish import publish_commands
from raybus.bus.streams import ensure_streams
from raybus.decisions.cluster.reconcile import ClusterSnapshot, reconcile_cluster
from raybus.decisions.cluster.settings import OperatorSettings
from raybus_sim.apiserver import RunningApiServer, start_apiserver, write_kubeconfig
from raybus_sim.kubelet import KubeletConfig
from raybus_sim.testing.servers import NatsServer
from tests.conftest import SAMPLES
from tests.integration.boundary.conftest import last_msg, until

from .conftest import FAST

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[3]
RAYBUS_YAML = REPO / "deploy" / "kustomize" / "base" / "rbac.yaml"
EXECUTOR = "system:serviceaccount:raybus-system:raybus-command-executor"
RAYCLUSTER = resource_for("ray.io/v1", "RayCluster")
_RBAC = "rbac.authorization.k8s.io"
_KINDS = {"Namespace": Resource("", "v1", "namespaces", "Namespace", namespaced=False),
          "ServiceAccount": resource_for("v1", "ServiceAccount"),
          "ClusterRole": Resource(_RBAC, "v1", "clusterroles", "ClusterRole", namespaced=False),
          "ClusterRoleBinding": Resource(_RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False)}
_ids = itertools.count()


@pytest.fixture
async def server() -> AsyncIterator[RunningApiServer]:
    srv = await start_apiserver(kubelet=KubeletConfig(delays=FAST), orphan_check_delay=0.05)
    yield srv
    await srv.stop()


@pytest.fixture
async def admin(server: RunningApiServer, tmp_path: Path) -> AsyncIterator[KubeClient]:
    kube = KubeClient(await new_api_client(str(write_kubeconfig(tmp_path / "admin", server.url))))
    yield kube
    await kube.close()


async def install_rbac(admin: KubeClient, *, drop: dict[str, Any] | None = None) -> None:
    """deploy/kustomize/base/rbac.yaml's namespace, ServiceAccounts, ClusterRoles and bindings, as an admin applies
    them; `drop` removes one rule from the executor's ClusterRole."""
    for doc in yaml.safe_load_all(RAYBUS_YAML.read_text()):
        if doc["kind"] not in _KINDS:
            continue
        if doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == "raybus-command-executor" and drop:
            doc["rules"] = [r for r in doc["rules"] if r != drop]
        res = _KINDS[doc["kind"]]
        await admin.create(res, doc, namespace=doc["metadata"].get("namespace") if res.namespaced else None)


async def start_executor(server: RunningApiServer, nats_url: str, tmp_path: Path) -> CommandExecutorService:
    token = server.service_account_token("raybus-system", "raybus-command-executor")
    kubeconfig = write_kubeconfig(tmp_path / "executor", server.url, token=token)
    service = CommandExecutorService(ExecutorSettings(nats_url=nats_url, kubeconfig=str(kubeconfig),
                                                      replica_id="x0", nak_delay_s=0.2,
                                                      admission=False))
    await service.start()
    return service


async def apply_first_reconcile(admin: KubeClient, js: JetStreamContext, name: str) -> tuple[CommandBatch, Outcome]:
    """Create the autoscaler sample's RayCluster, decide its first reconcile, send it to the executor."""
    doc = next(d for d in yaml.safe_load_all((SAMPLES / "ray-cluster.autoscaler.yaml").read_text())
               if d and d.get("kind") == "RayCluster")
    doc["metadata"] = {"name": name, "namespace": "default"}
    created = await admin.create(RAYCLUSTER, doc, namespace="default")
    cluster = RayCluster.model_validate(created)
    decision = reconcile_cluster(ClusterSnapshot(cluster=cluster), settings=OperatorSettings(),
                                 now=datetime.now(UTC), entropy="rbac")
    batch = CommandBatch(key=ObjectKey(namespace="default", name=name), kind="raycluster",
                         uid=created["metadata"]["uid"], controller="cluster", reconcile_id=f"rbac-{next(_ids)}",
                         commands=decision.commands)
    await publish_commands(js, batch)

    async def done() -> Outcome | None:
        raw = await last_msg(js, s.STREAM_OUTCOMES, s.outcome_subject("cluster", "default", name))
        out = Outcome.model_validate_json(raw.data) if raw is not None else None
        return out if out is not None and out.reconcile_id == batch.reconcile_id else None
    return batch, await until(done, timeout=30, what=f"outcome of {batch.reconcile_id}")


async def _exists(admin: KubeClient, api_version: str, kind: str, name: str) -> bool:
    try:
        await admin.get(resource_for(api_version, kind), namespace="default", name=name)
    except KubeError as exc:
        if exc.not_found:
            return False
        raise
    return True


async def test_executor_token_is_authorized_by_rbac(server: RunningApiServer, admin: KubeClient,
                                                    tmp_path: Path) -> None:
    await install_rbac(admin)
    kubeconfig = write_kubeconfig(tmp_path / "executor", server.url,
                                  token=server.service_account_token("raybus-system", "raybus-command-executor"))
    executor = KubeClient(await new_api_client(str(kubeconfig)))
    try:
        with pytest.raises(KubeError) as exc:  # the executor may not touch what its ClusterRole leaves out
            await executor.list_page(resource_for("v1", "ConfigMap"), namespace="default")
        assert exc.value.code == 403 and exc.value.message == (
            f'configmaps is forbidden: User "{EXECUTOR}" cannot list resource "configmaps" in API group "" in '
            f'the namespace "default"')
        assert (await executor.list_page(RAYCLUSTER, namespace="default"))["items"] == []
    finally:
        await executor.close()


async def test_executor_creates_the_autoscaler_rbac_and_pods(server: RunningApiServer, admin: KubeClient,
                                                            nats_server: NatsServer, tmp_path: Path) -> None:
    await install_rbac(admin)
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js)
    service = await start_executor(server, nats_server.url, tmp_path)
    try:
        batch, out = await apply_first_reconcile(admin, js, "raycluster-autoscaler")
        assert [r.ok for r in out.results] == [True] * len(batch.commands), [r.message for r in out.results]
        kinds = [c.object["kind"] for c in batch.commands if hasattr(c, "object")]
        assert kinds[:3] == ["ServiceAccount", "Role", "RoleBinding"] and "Pod" in kinds
        for cmd in batch.commands:
            obj = cmd.object  # type: ignore[union-attr]
            assert await _exists(admin, obj["apiVersion"], obj["kind"], obj["metadata"]["name"])
        role = await admin.get(resource_for(f"{_RBAC}/v1", "Role"), namespace="default", name="raycluster-autoscaler")
        assert {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]} in role["rules"]
    finally:
        await service.stop()
        await nc.close()


async def test_executor_without_pods_resize_cannot_grant_it(server: RunningApiServer, admin: KubeClient,
                                                            nats_server: NatsServer, tmp_path: Path) -> None:
    await install_rbac(admin, drop={"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]})
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    await ensure_streams(js)
    service = await start_executor(server, nats_server.url, tmp_path)
    try:
        batch, out = await apply_first_reconcile(admin, js, "raycluster-autoscaler")
        sa, role = out.results[0], out.results[1]
        assert sa.ok and sa.target == "ServiceAccount/default/raycluster-autoscaler"
        assert (role.ok, role.code, role.target) == (False, 403, "Role/default/raycluster-autoscaler")
        assert role.message == (
            f'Forbidden: roles.{_RBAC} "raycluster-autoscaler" is forbidden: user "{EXECUTOR}" (groups='
            f'["system:serviceaccounts" "system:serviceaccounts:raybus-system" "system:authenticated"]) is '
            f"attempting to grant RBAC permissions not currently held:\n"
            f'{{APIGroups:[""], Resources:["pods/resize"], Verbs:["patch"]}}')
        assert all(not r.ok and r.message.startswith("skipped") for r in out.results[2:])  # first failure stops
        assert not await _exists(admin, f"{_RBAC}/v1", "Role", "raycluster-autoscaler")
        assert not await _exists(admin, "v1", "Pod", next(c.object["metadata"]["name"] for c in batch.commands
                                                          if c.object["kind"] == "Pod"))  # type: ignore[union-attr]
    finally:
        await service.stop()
        await nc.close()
