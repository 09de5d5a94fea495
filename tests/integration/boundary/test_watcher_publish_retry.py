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

from raybus.adapters.informer import Informer
from raybus.adapters.kube import KubeClient, new_api_client, resource_for
from raybus.bus import subjects as s
from tests.integration.boundary.conftest import until
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
    # window=1: every event of the kind strictly in order (the pipelined default keeps the order
    # per object only; see the next test).
    informer = Informer(kube, spec, sink=sink, namespace="default", window=1)
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


async def test_pipelined_publishes_keep_each_objects_order_and_the_resume_point(kubeconfig: Path) -> None:
    """Watch events are published up to `window` at a time (informer.PUBLISH_WINDOW). One failing
    in the middle of a burst must not lose an object, must not let an older version of an object
    land after a newer one (RAYBUS_OBJECTS keeps the last value per subject), and must hold the
    watch's resume point (resource_version) before it until it lands."""
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    landed: list[tuple[str, int]] = []  # (pod, resourceVersion) in the order the sink finished
    in_flight = 0
    most_in_flight = 0
    failing: dict[str, int] = {}  # the event that fails: pod -> its resourceVersion, until it lands
    watermark_while_failing: list[int] = []

    async def sink(etype: str, obj: dict[str, Any], old: dict[str, Any] | None) -> bool:
        nonlocal in_flight, most_in_flight
        name, rv = obj["metadata"]["name"], int(obj["metadata"]["resourceVersion"])
        in_flight += 1
        most_in_flight = max(most_in_flight, in_flight)
        try:
            if failing:
                watermark_while_failing.append(int(informer.resource_version or 0))
            # The second version of p05 fails FAILURES times, each after 0.2 s (later events
            # land meanwhile); its first version is slow, so the second could overtake it if
            # the informer did not chain them.
            if name == "p05" and obj["metadata"].get("labels", {}).get("v") == "1" \
                    and informer.publish_failures < FAILURES:
                failing[name] = rv
                await asyncio.sleep(0.2)
                raise NoStreamResponseError
            if name in ("p05", "p15") and obj["metadata"].get("labels", {}).get("v") == "0":
                await asyncio.sleep(1.0)  # p15's second version must not overtake it
            await asyncio.sleep(0.01 * (hash(name) % 5))  # acks come back out of order
            landed.append((name, rv))
            if failing.get(name) == rv:
                del failing[name]
            return True
        finally:
            in_flight -= 1

    spec = WatchSpec(s.Kind.POD, "v1", "Pod", label_selector="ray.io/cluster")
    informer = Informer(kube, spec, sink=sink, namespace="default", window=64)
    task = asyncio.create_task(informer.run())
    names = [f"p{i:02d}" for i in range(20)]
    try:
        await asyncio.wait_for(informer.synced.wait(), 15.0)
        for name in names:
            await kube.create(POD, _labelled(pod(name), "0"), namespace="default")
        final: dict[str, int] = {}
        for name in names:
            out = await kube.merge_patch(POD, namespace="default", name=name,
                                         patch={"metadata": {"labels": {"v": "1"}}})
            final[name] = int(out["metadata"]["resourceVersion"])
        await until(lambda: _async(all((n, rv) in landed for n, rv in final.items())), timeout=30.0,
                    what="every pod's last version published")
        assert informer.publish_failures == FAILURES
        assert most_in_flight > 1, "the publishes were not pipelined"
        for name in names:  # per object: versions land in order, the last one last
            versions = [rv for n, rv in landed if n == name]
            assert versions == sorted(versions) and versions[-1] == final[name], (name, versions)
        assert informer.known[("default", "p05")]["metadata"]["resourceVersion"] == str(final["p05"])
        # Later events landed while p05's failed, yet the resume point never passed it meanwhile.
        landed_at = landed.index(("p05", final["p05"]))
        assert any(rv > final["p05"] for _, rv in landed[:landed_at]), landed
        assert watermark_while_failing and max(watermark_while_failing) < final["p05"]
        await until(lambda: _async(int(informer.resource_version) >= max(final.values())),
                    what="the resume point past the burst once everything landed")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await informer.drain(timeout=5.0)
        await kube.close()


def _labelled(body: dict[str, Any], version: str) -> dict[str, Any]:
    body["metadata"]["labels"]["v"] = version
    return body
