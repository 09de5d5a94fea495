"""A failed publish must not put the watcher's informer to sleep for the list/watch backoff.

Found by the chaos soak (seed 7, 20 min): after a NATS node restart the RayCluster informer's
publishes failed a few times in a row; each failure went through the API list/watch backoff
(0.8 s doubling to 30 s, reset only when a watch ends cleanly), so the informer slept 6-13 s while
the Pod informer kept publishing. The reconciler saw the Pods of a RayCluster deleted by the
workload vanish (garbage collected) but still had the RayCluster, and created up to 7 head Pods
that the GC removed again. Against the local API server, with the informer's sink failing the way
a JetStream publish does during a leader election.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from nats.js.errors import NoStreamResponseError

from raybus.adapters.kube import KubeClient, new_api_client, resource_for
from raybus.bus import subjects as s
from tests.integration.boundary.conftest import until
from watcher.informer import Informer
from watcher.routing import WatchSpec

POD = resource_for("v1", "Pod")
FAILURES = 4  # the list/watch backoff would sleep 0.8 + 1.6 + 3.2 + 6.4 = 12 s


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"ray.io/cluster": "c", "ray.io/node-type": "head"}},
            "spec": {"containers": [{"name": "ray", "image": "rayproject/ray"}]}}


async def test_a_failed_publish_is_retried_within_seconds_and_in_order(kubeconfig: Path) -> None:
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    published: list[tuple[str, str]] = []
    failures: list[float] = []

    async def sink(etype: str, obj: dict[str, Any], old: dict[str, Any] | None) -> bool:
        name = obj["metadata"]["name"]
        if name == "c-head" and etype == "DELETED" and len(failures) < FAILURES:
            failures.append(time.monotonic())
            raise NoStreamResponseError  # what js.publish raised in the soak while NATS elected
        published.append((etype, name))
        return True

    spec = WatchSpec(s.Kind.POD, "v1", "Pod", label_selector="ray.io/cluster")
    informer = Informer(kube, spec, sink=sink, namespace="default")
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 15.0)  # watching: the create comes as ADDED
        await kube.create(POD, pod("c-head"), namespace="default")
        await until(lambda: _async(("ADDED", "c-head") in published), what="c-head ADDED")
        await kube.delete(POD, namespace="default", name="c-head")
        await kube.create(POD, pod("c-after"), namespace="default")
        await until(lambda: _async(("DELETED", "c-head") in published), timeout=30.0, what="c-head DELETED")
        delivered = time.monotonic()
        # Retried in place (0.1 s doubling): well under the 12 s the list/watch backoff slept.
        assert delivered - failures[0] < 4.0, f"published {delivered - failures[0]:.1f}s after the first failure"
        assert len(failures) == FAILURES and informer.publish_failures == FAILURES
        await until(lambda: _async(("ADDED", "c-after") in published), what="c-after ADDED")
        # The events of one kind stay in order: the later Pod is not published before the deletion.
        assert published.index(("DELETED", "c-head")) < published.index(("ADDED", "c-after"))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kube.close()


async def _async(value: bool) -> bool:
    return value
