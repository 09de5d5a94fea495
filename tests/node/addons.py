"""What a cluster has beside its nodes: DNS (kube-dns) and volumes for PersistentVolumeClaims.

Volumes: static hostPath PersistentVolumes under the run folder, no StorageClass: a claim without
a class binds to one of them (the PersistentVolume controller of kube-controller-manager), so the
NATS and Redis StatefulSets keep their volumeClaimTemplates as the base has them. The folders are
world-writable: a hostPath volume gets no fsGroup, and NATS and Redis run as their own users.
"""

from __future__ import annotations

import json
import time

from tests.node.node import REPO, Node, log

PV_COUNT = 8
PV_SIZE = "10Gi"


def persistent_volumes(node: Node) -> None:
    folder = node.root / "pv"
    items = []
    for i in range(PV_COUNT):
        path = folder / f"pv-{i}"
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o777)
        items.append({
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"node-pv-{i}"},
            "spec": {"capacity": {"storage": PV_SIZE}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                     "hostPath": {"path": str(path), "type": "Directory"}}})
    node.kubectl("apply", "--server-side", "-f", "-", input_=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                          "items": items}))


def kube_dns(node: Node) -> None:
    node.kubectl("apply", "--server-side", "-f", str(REPO / "deploy" / "node" / "kube-dns.yaml"))


def install(node: Node) -> None:
    started = time.monotonic()
    persistent_volumes(node)
    kube_dns(node)
    node.kubectl("rollout", "status", "-n", "kube-system", "deployment/kube-dns", "--timeout=180s", timeout=200)
    log(f"kube-dns ready, {PV_COUNT} PersistentVolumes ({time.monotonic() - started:.0f} s)")
