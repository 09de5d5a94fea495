"""Optional kinds on the local API server (which, like a real one, serves a PodGroup only once its
CRD exists): the watcher does not list a kind discovery does not show, starts watching it when its
CRD appears, and when the CRD goes it stops and retracts what it had published."""

from __future__ import annotations

from pathlib import Path

import nats

from raybus.adapters.kube import KubeClient, KubeError, Resource, new_api_client, resource_for
from raybus.bus import subjects as s
from raybus_sim.testing.servers import NatsServer
from tests.integration.boundary.conftest import until
from tests.integration.boundary.test_watcher import object_event
from watcher.app import WatcherSettings, create_app

CRD = Resource(group="apiextensions.k8s.io", version="v1", plural="customresourcedefinitions",
               kind="CustomResourceDefinition", namespaced=False)
PG = resource_for("scheduling.volcano.sh/v1beta1", "PodGroup")
PG_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.volcano.sh"},
    "spec": {"group": "scheduling.volcano.sh", "scope": "Namespaced",
             "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup", "listKind": "PodGroupList"},
             "versions": [{"name": "v1beta1", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]},
}


def _watching(watcher: object, kind: s.Kind) -> bool:
    return any(i.spec.kind is kind for i in watcher.informers)  # type: ignore[attr-defined]


async def test_pod_groups_watched_while_their_crd_is_served(nats_server: NatsServer, kubeconfig: Path) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    # create_app: the --batch-scheduler's PodGroup spec is added there, as `python -m watcher` does.
    watcher = create_app(WatcherSettings(nats_url=nats_server.url, kubeconfig=str(kubeconfig), replica_id="w0",
                                         batch_scheduler="volcano", discovery_s=0.1))
    await watcher.start()
    await watcher.wait_synced()
    try:
        assert not _watching(watcher, s.Kind.PODGROUP), "not served: not listed at all"
        assert _watching(watcher, s.Kind.POD)
        await kube.create(CRD, PG_CRD, namespace=None)

        async def watching() -> bool:
            return _watching(watcher, s.Kind.PODGROUP)
        await until(watching, what="the PodGroup informer once discovery shows the CRD")
        await kube.create(PG, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                               "metadata": {"name": "ray-c-pg", "ownerReferences": [{
                                   "apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "c",
                                   "uid": "u-1", "controller": True}]},
                               "spec": {"minMember": 2}}, namespace="default")
        added, _ = await object_event(js, s.Kind.PODGROUP, "ray-c-pg")
        assert added.type in ("ADDED", "SYNC")

        informer = next(i for i in watcher.informers if i.spec.kind is s.Kind.PODGROUP)
        await kube.delete(CRD, namespace=None, name="podgroups.scheduling.volcano.sh")

        async def stopped() -> bool:
            return not _watching(watcher, s.Kind.PODGROUP)
        await until(stopped, what="the PodGroup informer to stop when the CRD goes")
        await object_event(js, s.Kind.PODGROUP, "ray-c-pg", pred=lambda e: e.type == "DELETED")
        assert informer.known == {}
        try:
            await kube.list_all(PG, namespace="default")
            raise AssertionError("PodGroups still served after the CRD was deleted")
        except KubeError as exc:
            assert exc.not_found
    finally:
        await watcher.stop()
        await kube.close()
        await nc.close()
