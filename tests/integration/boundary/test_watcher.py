"""Watcher against the local API server and a real nats-server: kubectl apply -> ObjectEvent +
Trigger, label routing, resume after an API server restart, relist on 410."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats

from raybus.adapters.kube import KubeClient, new_api_client, resource_for
from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectEvent, Trigger
from raybus_sim.apiserver import RunningApiServer, start_apiserver, write_kubeconfig
from raybus_sim.testing.servers import NatsServer, free_port
from tests.conftest import SAMPLES
from tests.integration.boundary.conftest import last_msg, until
from watcher.app import Watcher, WatcherSettings

POD = resource_for("v1", "Pod")


def pod(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "ray", "image": "rayproject/ray"}]}}


async def start_watcher(nats_url: str, kubeconfig: Path, **kw: Any) -> Watcher:
    watcher = Watcher(WatcherSettings(nats_url=nats_url, kubeconfig=str(kubeconfig), replica_id="w0", **kw))
    await watcher.start()
    await watcher.wait_synced()
    return watcher


async def object_event(js: Any, kind: s.Kind, name: str, *, ns: str = "default",
                       pred: Any = lambda e: True, scope: str = s.NO_SCOPE) -> tuple[ObjectEvent, int]:
    async def get() -> tuple[ObjectEvent, int] | None:
        raw = await last_msg(js, s.STREAM_OBJECTS, s.object_subject(kind, ns, name, scope))
        if raw is None:
            return None
        event = ObjectEvent.model_validate_json(raw.data)
        return (event, raw.seq) if pred(event) else None
    return await until(get, what=f"object event {kind.value} {ns}/{name}")  # type: ignore[no-any-return]


async def trigger(js: Any, controller: s.Controller, name: str, *, ns: str = "default",
                  min_seq: int = 0) -> Trigger:
    async def get() -> Trigger | None:
        raw = await last_msg(js, s.trigger_stream(controller), s.trigger_subject(controller, namespace=ns, name=name))
        trig = Trigger.model_validate_json(raw.data) if raw is not None else None
        return trig if trig is not None and trig.objects_seq >= min_seq else None
    return await until(get, what=f"trigger {controller.value} {ns}/{name}")  # type: ignore[no-any-return]


async def test_kubectl_apply_sample_publishes_object_event_and_cluster_trigger(
        nats_server: NatsServer, kubeconfig: Path) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    watcher = await start_watcher(nats_server.url, kubeconfig)
    try:
        proc = await asyncio.create_subprocess_exec(
            "kubectl", "--kubeconfig", str(kubeconfig), "apply", "-f",
            str(SAMPLES / "ray-cluster.sample.yaml"),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
        assert proc.returncode == 0, out.decode()
        event, seq = await object_event(js, s.Kind.RAYCLUSTER, "raycluster-kuberay")
        assert event.type in ("ADDED", "SYNC") and event.kind == "raycluster"
        assert (event.key.namespace, event.key.name) == ("default", "raycluster-kuberay")
        assert event.object["spec"]["headGroupSpec"] and event.uid and event.resource_version
        assert "managedFields" not in event.object["metadata"]
        trig = await trigger(js, s.Controller.CLUSTER, "raycluster-kuberay")
        assert trig.objects_seq == seq and trig.kind == "raycluster"
        assert trig.cause.startswith(event.type)
    finally:
        await watcher.stop()
        await nc.close()


async def test_labelled_pod_is_published_without_a_cluster_trigger_and_unrelated_pods_are_ignored(
        nats_server: NatsServer, kubeconfig: Path) -> None:
    """A labelled Pod's events are published; its RayCluster wakes from the reconciler's own cache
    (podutil.clusters_to_wake), so no RayCluster trigger is published for it. A Pod routed by
    its ownerReference alone (no ray.io/cluster label) still triggers its RayCluster."""
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    watcher = await start_watcher(nats_server.url, kubeconfig)
    try:
        await kube.create(POD, pod("x-worker-abc", {"ray.io/cluster": "x", "ray.io/node-type": "worker"}),
                          namespace="default")
        await kube.create(POD, pod("nginx", {"app": "nginx"}), namespace="default")
        await object_event(js, s.Kind.POD, "x-worker-abc")
        await kube.delete(POD, namespace="default", name="x-worker-abc")
        deleted, _ = await object_event(js, s.Kind.POD, "x-worker-abc", pred=lambda e: e.type == "DELETED")
        assert deleted.object["metadata"]["labels"]["ray.io/cluster"] == "x"
        # Published after x's events by the same informer: once its trigger is there, any
        # trigger for x would be too.
        await kube.create(POD, _owned_by("y", "y-worker-def"), namespace="default")
        _, yseq = await object_event(js, s.Kind.POD, "y-worker-def")
        ytrig = await trigger(js, s.Controller.CLUSTER, "y", min_seq=yseq)
        assert ytrig.cause == "ADDED pod default/y-worker-def"
        assert await last_msg(js, s.trigger_stream(s.Controller.CLUSTER), s.trigger_subject(s.Controller.CLUSTER, namespace="default",
                                                                       name="x")) is None
        assert await last_msg(js, s.STREAM_OBJECTS, s.object_subject(s.Kind.POD, "default", "nginx")) is None
    finally:
        await watcher.stop()
        await kube.close()
        await nc.close()


@contextlib.asynccontextmanager
async def _watching_triggers(nats_server: NatsServer, kubeconfig: Path,
                             cluster: str) -> AsyncIterator[tuple[Any, KubeClient, list[Trigger]]]:
    """A watcher on the local API server, and every cluster-controller trigger for `cluster`:
    yields (the NATS connection, a kube client, the triggers sent so far)."""
    nc = await nats.connect(nats_server.url)
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    watcher = await start_watcher(nats_server.url, kubeconfig)
    sent: list[Trigger] = []

    async def on_trigger(msg: Any) -> None:
        sent.append(Trigger.model_validate_json(msg.data))

    sub = await nc.subscribe(s.trigger_subject(s.Controller.CLUSTER, namespace="default", name=cluster),
                             cb=on_trigger)
    try:
        yield nc, kube, sent
    finally:
        await sub.unsubscribe()
        await watcher.stop()
        await kube.close()
        await nc.close()


async def test_worker_pod_updates_no_decision_reads_are_not_published_and_wake_nothing(
        nats_server: NatsServer, kubeconfig: Path) -> None:
    """The kubelet's bookkeeping (hostIP, startTime) of a worker Pod is not published
    (routing.only_cluster_decisions_read); the phase change after it is published with
    everything, bookkeeping included. A head Pod's bookkeeping is published: the RayJob and
    RayService reconcilers read head Pods. None of it is a RayCluster trigger: labelled Pods wake
    their RayCluster from the reconciler's cache (tests/integration/bus/test_cache_wakes.py)."""
    async with _watching_triggers(nats_server, kubeconfig, "quiet") as (nc, kube, sent):
        js = nc.jetstream()
        # Distinct versions on the wire, by resourceVersion: a version published again (an
        # informer's relist after a dropped watch) is the same version, which the stream stores once.
        versions: dict[str, dict[str, dict[str, Any]]] = {"quiet-worker-a": {}, "quiet-head": {}}

        async def on_object(msg: Any) -> None:
            event = ObjectEvent.model_validate_json(msg.data)
            versions[event.key.name].setdefault(str(event.resource_version), event.object.get("status") or {})

        subs = [await nc.subscribe(s.object_subject(s.Kind.POD, "default", name), cb=on_object)
                for name in versions]
        await nc.flush()  # the server has both subscriptions before the first Pod exists
        created = await kube.create(POD, pod("quiet-worker-a", {"ray.io/cluster": "quiet",
                                                                "ray.io/node-type": "worker"}), namespace="default")
        head = await kube.create(POD, pod("quiet-head", {"ray.io/cluster": "quiet", "ray.io/node-type": "head"}),
                                 namespace="default")
        _, seq1 = await object_event(js, s.Kind.POD, "quiet-worker-a")
        await object_event(js, s.Kind.POD, "quiet-head")
        bookkeeping = {"phase": "Pending", "hostIP": "172.18.0.2", "startTime": "2026-01-01T00:00:00Z"}
        booked = await kube.replace_status(POD, {**created, "status": bookkeeping})
        await kube.replace_status(POD, {**head, "status": bookkeeping})
        await object_event(js, s.Kind.POD, "quiet-head", pred=lambda e: e.object.get("status", {}).get("hostIP"))
        await kube.replace_status(POD, {**booked, "status": {**booked["status"], "phase": "Running"}})
        running, seq3 = await object_event(js, s.Kind.POD, "quiet-worker-a",
                                           pred=lambda e: e.object.get("status", {}).get("phase") == "Running")
        assert running.object["status"]["hostIP"] == "172.18.0.2"  # the skipped version's fields ride along
        assert seq1 < seq3
        await until(lambda: _async(str(running.resource_version) in versions["quiet-worker-a"]),
                    what="the worker's Running version delivered")
        # The worker's bookkeeping-only version never reached the bus; the head's did.
        assert [(v.get("phase"), v.get("hostIP")) for v in versions["quiet-worker-a"].values()] == [
            ("Pending", None), ("Running", "172.18.0.2")]
        assert str(booked["metadata"]["resourceVersion"]) not in versions["quiet-worker-a"]
        assert any(v.get("hostIP") and v.get("phase") == "Pending" for v in versions["quiet-head"].values())
        # The first RayCluster trigger for "quiet" is the one of a Pod it owns without the
        # label, published after all of the above by the same informer.
        await kube.create(POD, _owned_by("quiet", "quiet-unlabelled"), namespace="default")
        _, anchor = await object_event(js, s.Kind.POD, "quiet-unlabelled")
        await until(lambda: _async(bool(sent)), what="the unlabelled Pod's trigger")
        assert [t.objects_seq for t in sent] == [anchor]
        for sub in subs:
            await sub.unsubscribe()


async def _async(value: Any) -> Any:
    return value


def _owned_by(cluster: str, name: str) -> dict[str, Any]:
    """A Ray Pod its RayCluster owns but did not label: routed (and triggered) by ownerReference."""
    body = pod(name, {"ray.io/node-type": "worker"})
    body["metadata"]["ownerReferences"] = [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": cluster,
                                            "uid": f"uid-{cluster}", "controller": True}]
    return body


async def test_a_burst_for_one_cluster_ends_with_a_trigger_for_its_last_event(
        nats_server: NatsServer, kubeconfig: Path) -> None:
    """Triggers to one target are folded while one is in flight (watcher._follow_up): never
    more triggers than events, and the last one always carries the last event's sequence."""
    async with _watching_triggers(nats_server, kubeconfig, "burst") as (nc, kube, sent):
        js = nc.jetstream()
        async def last_sent() -> bool:
            return bool(sent) and sent[-1].objects_seq == max(seqs)

        # Owned, not labelled: labelled Pods trigger no RayCluster (they wake it from its cache).
        await asyncio.gather(*(kube.create(POD, _owned_by("burst", f"burst-worker-{i}"), namespace="default")
                               for i in range(30)))
        seqs = [(await object_event(js, s.Kind.POD, f"burst-worker-{i}"))[1] for i in range(30)]
        last = await trigger(js, s.Controller.CLUSTER, "burst", min_seq=max(seqs))
        assert last.objects_seq == max(seqs)
        await until(last_sent, what="the last trigger on the wire")
        assert 1 <= len(sent) <= 30
        assert [t.objects_seq for t in sent] == sorted(t.objects_seq for t in sent)


async def test_watch_resumes_after_apiserver_restart_without_relisting(
        nats_server: NatsServer, crd_dir: Path, tmp_path: Path) -> None:
    port, state = free_port(), tmp_path / "apiserver-state.json"
    server: RunningApiServer = await start_apiserver(port=port, crd_dir=crd_dir, kubelet=False,
                                                     state_file=state)
    kubeconfig = write_kubeconfig(tmp_path / "kc", server.url)
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    watcher = await start_watcher(nats_server.url, kubeconfig)
    pods = next(i for i in watcher.informers if i.spec.kind is s.Kind.POD)
    try:
        await kube.create(POD, pod("a-head", {"ray.io/cluster": "a", "ray.io/node-type": "head"}),
                          namespace="default")
        await object_event(js, s.Kind.POD, "a-head")
        await server.stop()  # writes the state file; the watcher's watch connection drops
        await asyncio.sleep(1.0)
        server = await start_apiserver(port=port, crd_dir=crd_dir, kubelet=False, state_file=state)
        await kube.create(POD, pod("a-worker", {"ray.io/cluster": "a", "ray.io/node-type": "worker"}),
                          namespace="default")
        await object_event(js, s.Kind.POD, "a-worker")
        assert pods.relists == 1, "resumed from the last resourceVersion, no relist needed"
    finally:
        await watcher.stop()
        await kube.close()
        await nc.close()
        await server.stop()


async def test_relist_on_410_publishes_deletions_and_changes_missed(
        nats_server: NatsServer, crd_dir: Path, tmp_path: Path) -> None:
    server = await start_apiserver(crd_dir=crd_dir, kubelet=False, history_size=5)
    kubeconfig = write_kubeconfig(tmp_path / "kc", server.url)
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    watcher = await start_watcher(nats_server.url, kubeconfig)
    index = next(i for i, inf in enumerate(watcher.informers) if inf.spec.kind is s.Kind.POD)
    pods = watcher.informers[index]
    try:
        labels = {"ray.io/cluster": "b", "ray.io/node-type": "worker"}
        for name in ("b-gone", "b-stays"):
            await kube.create(POD, pod(name, labels), namespace="default")
        await object_event(js, s.Kind.POD, "b-stays")
        # Take the pod informer offline (a partitioned watcher) while the history window moves on.
        watcher._tasks[index].cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher._tasks[index]
        await kube.delete(POD, namespace="default", name="b-gone")
        for i in range(8):
            await kube.merge_patch(POD, namespace="default", name="b-stays",
                                   patch={"metadata": {"annotations": {"n": str(i)}}})
        watcher._tasks[index] = asyncio.create_task(pods.run())
        gone, _ = await object_event(js, s.Kind.POD, "b-gone", pred=lambda e: e.type == "DELETED")
        assert gone.object["metadata"]["name"] == "b-gone"
        changed, _ = await object_event(js, s.Kind.POD, "b-stays",
                                        pred=lambda e: e.object["metadata"].get("annotations", {}).get("n") == "7")
        assert changed.type == "SYNC"
        assert pods.relists == 2
    finally:
        await watcher.stop()
        await kube.close()
        await nc.close()
        await server.stop()


async def test_restarted_watcher_publishes_only_differences(nats_server: NatsServer, kubeconfig: Path) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    labels = {"ray.io/cluster": "c", "ray.io/node-type": "worker"}
    watcher = await start_watcher(nats_server.url, kubeconfig)
    try:
        for name in ("c-1", "c-2"):
            await kube.create(POD, pod(name, labels), namespace="default")
        _, seq = await object_event(js, s.Kind.POD, "c-2")
        first = watcher
        await until(lambda: asyncio.sleep(0, first.published >= 2), what="both pods published")
        await watcher.stop()
        await kube.delete(POD, namespace="default", name="c-1")
        watcher = await start_watcher(nats_server.url, kubeconfig)
        await object_event(js, s.Kind.POD, "c-1", pred=lambda e: e.type == "DELETED")
        assert watcher.published == 1, "only the deletion missed while down is published again"
        raw = await last_msg(js, s.STREAM_OBJECTS, s.object_subject(s.Kind.POD, "default", "c-2"))
        assert raw.seq == seq
    finally:
        await watcher.stop()
        await kube.close()
        await nc.close()


async def test_owned_objects_route_to_owner_and_endpointslices_via_their_service(
        nats_server: NatsServer, kubeconfig: Path) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    svc_res, slice_res = resource_for("v1", "Service"), resource_for("discovery.k8s.io/v1", "EndpointSlice")
    watcher = await start_watcher(nats_server.url, kubeconfig)
    owner = {"apiVersion": "ray.io/v1", "kind": "RayService", "name": "rs", "uid": "rs-uid",
             "controller": True}
    try:
        await kube.create(svc_res, {"apiVersion": "v1", "kind": "Service",
                                    "metadata": {"name": "rs-serve-svc", "ownerReferences": [owner]},
                                    "spec": {"ports": [{"port": 8000}]}}, namespace="default")
        await kube.create(svc_res, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "unrelated"},
                                    "spec": {"ports": [{"port": 80}]}}, namespace="default")
        _, svc_seq = await object_event(js, s.Kind.SERVICE, "rs-serve-svc")
        await trigger(js, s.Controller.SERVICE, "rs", min_seq=svc_seq)
        await kube.create(slice_res, {
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": {"name": "rs-serve-svc-abcde", "labels": {"kubernetes.io/service-name": "rs-serve-svc"}},
            "endpoints": [{"addresses": ["10.0.0.7"], "conditions": {"ready": True}}]}, namespace="default")
        _, slice_seq = await object_event(js, s.Kind.ENDPOINTSLICE, "rs-serve-svc-abcde")
        trig = await trigger(js, s.Controller.SERVICE, "rs", min_seq=slice_seq)
        assert trig.cause == "ADDED endpointslice default/rs-serve-svc-abcde" and trig.kind == "rayservice"
        assert await last_msg(js, s.STREAM_OBJECTS, s.object_subject("service", "default", "unrelated")) is None
        # Losing its ray.io owner retracts the Service from the bus (published as DELETED).
        await kube.merge_patch(svc_res, namespace="default", name="rs-serve-svc",
                               patch={"metadata": {"ownerReferences": None}})
        await object_event(js, s.Kind.SERVICE, "rs-serve-svc", pred=lambda e: e.type == "DELETED")
    finally:
        await watcher.stop()
        await kube.close()
        await nc.close()


async def test_two_watcher_replicas_store_each_version_once(nats_server: NatsServer, kubeconfig: Path) -> None:
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    watchers = [await start_watcher(nats_server.url, kubeconfig) for _ in range(2)]
    try:
        before = (await js.stream_info(s.STREAM_OBJECTS)).state.last_seq
        await kube.create(POD, pod("d-head", {"ray.io/cluster": "d", "ray.io/node-type": "head"}),
                          namespace="default")
        _, seq = await object_event(js, s.Kind.POD, "d-head")
        # Both publishes were acked by JetStream (the second as a duplicate): nothing in flight.
        await until(lambda: asyncio.sleep(0, all(w.published >= 1 for w in watchers)), what="both published")
        assert (await js.stream_info(s.STREAM_OBJECTS)).state.last_seq == before + 1 == seq
    finally:
        for w in watchers:
            await w.stop()
        await kube.close()
        await nc.close()


async def test_periodic_resync_relists_without_republishing_unchanged(
        nats_server: NatsServer, kubeconfig: Path) -> None:
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    await kube.create(POD, pod("e-head", {"ray.io/cluster": "e", "ray.io/node-type": "head"}), namespace="default")
    watcher = await start_watcher(nats_server.url, kubeconfig, resync_s=0.5)
    pods = next(i for i in watcher.informers if i.spec.kind is s.Kind.POD)
    try:
        published = watcher.published
        await until(lambda: asyncio.sleep(0, pods.relists >= 3), what="periodic relists")
        assert watcher.published == published
    finally:
        await watcher.stop()
        await kube.close()


async def test_a_rayjob_clusters_pods_are_published_in_its_scope_until_deleted(
        nats_server: NatsServer, kubeconfig: Path) -> None:
    """Pods of a RayJob's cluster go to raybus.obj.pod.rayjob..., so the job-reconciler follows
    only those; the deletion reaches the same subject even after the cluster (and so the owner
    the scope was derived from) is gone."""
    nc = await nats.connect(nats_server.url)
    js = nc.jetstream()
    kube = KubeClient(await new_api_client(str(kubeconfig)))
    rc_res = resource_for("ray.io/v1", "RayCluster")
    watcher = await start_watcher(nats_server.url, kubeconfig)
    try:
        body = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
                "metadata": {"name": "job-rc", "ownerReferences": [
                    {"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "job", "uid": "u1",
                     "controller": True}]},
                "spec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                    {"name": "ray-head", "image": "rayproject/ray"}]}}}}}
        await kube.create(rc_res, body, namespace="default")
        cluster, _ = await object_event(js, s.Kind.RAYCLUSTER, "job-rc", scope="rayjob")
        assert cluster.scope == "rayjob"
        await kube.create(POD, pod("job-rc-head", {"ray.io/cluster": "job-rc", "ray.io/node-type": "head"}),
                          namespace="default")
        event, _ = await object_event(js, s.Kind.POD, "job-rc-head", scope="rayjob")
        assert event.scope == "rayjob"
        assert await last_msg(js, s.STREAM_OBJECTS, s.object_subject(s.Kind.POD, "default", "job-rc-head")) is None
        await kube.delete(rc_res, namespace="default", name="job-rc", propagation="Orphan")
        await object_event(js, s.Kind.RAYCLUSTER, "job-rc", scope="rayjob", pred=lambda e: e.type == "DELETED")
        await kube.delete(POD, namespace="default", name="job-rc-head")
        await object_event(js, s.Kind.POD, "job-rc-head", scope="rayjob", pred=lambda e: e.type == "DELETED")
    finally:
        await watcher.stop()
        await kube.close()
        await nc.close()
