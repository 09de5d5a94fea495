"""Issue 13 end to end on the local stack (two cluster-reconciler replicas): the token auth Secret and
the kubelet's refusal to start containers whose Secret is missing, GCS FT Redis cleanup on deletion
(Job succeeds, fails, or the deletion times out), HeadPodReady messages, serve-* ports, MIG GPUs,
Kueue's suspend/managedBy, and a RayCluster created with metadata.generateName."""

from __future__ import annotations

import asyncio
import base64
import copy
from pathlib import Path
from typing import Any

import nats
import nats.js.errors
import yaml

from raybus.adapters.kube import KubeError, resource_for
from raybus.bus import subjects as s
from raybus.cli.render import render
from raybus.decisions.cluster.podutil import is_head
from raybus_sim.testing.streams import stream_messages
from tests.conftest import SAMPLES
from tests.integration.e2e.conftest import NS, POD, RC, SAMPLE, Kube

SECRET = resource_for("v1", "Secret")
JOB = resource_for("batch/v1", "Job")
SERVICE = resource_for("v1", "Service")
FIN = "ray.io/gcs-ft-redis-cleanup-finalizer"


def _sample(path: Path, name: str) -> dict[str, Any]:
    body = next(d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict) and d.get("kind") == "RayCluster")
    body["metadata"] = {**body["metadata"], "name": name, "namespace": NS}
    return body


def _conditions(rc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (rc.get("status") or {}).get("conditions") or []}


async def _gone(kube: Kube, name: str) -> bool:
    try:
        await kube.cluster(name)
    except KubeError as exc:
        return exc.not_found
    return False


async def _bus_contains(kube: Kube, needle: bytes) -> list[str]:
    """Every stream message (all of the session's history) that contains `needle`."""
    assert kube.stack.nats is not None
    nc = await nats.connect(**kube.stack.nats.options())
    found: list[str] = []
    try:
        js = nc.jetstream()
        for stream in (s.STREAM_OBJECTS, s.STREAM_COMMANDS, s.STREAM_STATUS, s.STREAM_OUTCOMES):
            found += [f"{stream}#{msg.seq} {msg.subject}" for msg in await stream_messages(js, stream)
                      if needle in (msg.data or b"")]
    finally:
        await nc.close()
    return found


# --- item 1: token auth -----------------------------------------------------------------------------------
async def test_token_auth_secret_is_created_once_wired_and_never_on_the_bus(kube: Kube) -> None:
    name = "e2e-auth"
    await kube.c.create(RC, _sample(SAMPLES / "ray-cluster.auth.yaml", name), namespace=NS)
    rc = await kube.wait_ready(name, workers=1, timeout=60)
    secret = await kube.c.get(SECRET, namespace=NS, name=name)
    owner = secret["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "RayCluster" and owner["uid"] == rc["metadata"]["uid"] and owner["controller"]
    assert secret["metadata"]["labels"] == {"ray.io/cluster": name}
    token = base64.b64decode(secret["data"]["auth_token"])
    assert len(token) >= 32
    for pod in await kube.pods(name):
        env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
        assert env["RAY_AUTH_MODE"]["value"] == "token"
        assert env["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": name, "key": "auth_token"}
    # Never re-generated: later rounds (a spec change wakes the reconciler) leave the value alone.
    await kube.patch_cluster(name, {"metadata": {"labels": {"touched": "yes"}}})
    await kube.settled(name)
    again = await kube.c.get(SECRET, namespace=NS, name=name)
    assert again["data"] == secret["data"] and again["metadata"]["uid"] == secret["metadata"]["uid"]
    # The value never travelled on the bus and was never logged.
    assert await _bus_contains(kube, token) == []
    assert await _bus_contains(kube, secret["data"]["auth_token"].encode()) == []
    logs = "".join(p.read_text(errors="replace") for p in (kube.stack.home / "logs").glob("*.log"))
    assert token.decode() not in logs and secret["data"]["auth_token"] not in logs


async def test_missing_user_secret_blocks_the_containers_until_it_exists(kube: Kube) -> None:
    name = "e2e-auth-late"
    body = _sample(SAMPLES / "ray-cluster.auth.yaml", name)
    body["spec"]["authOptions"] = {"mode": "token", "secretName": "e2e-late-token"}
    await kube.c.create(RC, body, namespace=NS)

    async def blocked() -> bool:
        cond = _conditions(await kube.cluster(name)).get("HeadPodReady") or {}
        return cond.get("reason") == "CreateContainerConfigError"

    await kube.eventually(blocked, what="HeadPodReady=CreateContainerConfigError")
    cond = _conditions(await kube.cluster(name))["HeadPodReady"]
    assert cond["status"] == "False" and cond["message"].endswith('secret "e2e-late-token" not found')
    head = (await kube.pods(name, node_type="head"))[0]
    waiting = head["status"]["containerStatuses"][0]["state"]["waiting"]
    assert waiting == {"reason": "CreateContainerConfigError", "message": 'secret "e2e-late-token" not found'}
    await kube.c.create(SECRET, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "e2e-late-token"},
                                 "data": {"auth_token": base64.b64encode(b"t" * 32).decode()}}, namespace=NS)
    await kube.wait_ready(name, workers=1, timeout=60)
    assert _conditions(await kube.cluster(name))["HeadPodReady"]["reason"] == "HeadPodRunningAndReady"


# --- item 2: GCS FT Redis cleanup ---------------------------------------------------------------------------
def _ft_body(name: str, **annotations: str) -> dict[str, Any]:
    body = copy.deepcopy(SAMPLE)
    body["metadata"] = {"name": name, "namespace": NS, "annotations": dict(annotations)}
    body["spec"]["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379"}
    body["spec"]["workerGroupSpecs"][0].update(replicas=2, minReplicas=0, maxReplicas=5)
    return body


class _Recorder:
    """(resourceVersion, kind, object) of every RayCluster/Pod change from before the cluster exists:
    resourceVersions are the API server's global write order."""

    def __init__(self, kube: Kube, name: str) -> None:
        self.kube, self.name = kube, name
        self.seen: list[tuple[int, str, dict[str, Any]]] = []
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        selector = f"ray.io/cluster={self.name}"
        for res, sel in ((RC, None), (POD, selector), (JOB, selector)):
            _, rv = await self.kube.c.list_all(res, namespace=NS, label_selector=sel)
            self.tasks.append(asyncio.create_task(self._run(res, rv, sel)))

    async def _run(self, res: Any, rv: str, selector: str | None) -> None:
        async for event in self.kube.c.watch(res, resource_version=rv, namespace=NS, timeout_s=600,
                                             label_selector=selector):
            meta = event.object.get("metadata") or {}
            if event.object.get("kind") == "RayCluster" and meta.get("name") != self.name:
                continue
            self.seen.append((int(meta.get("resourceVersion") or 0), str(event.type), event.object))

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    def matching(self, kind: str, etype: str | None = None, *, when: Any = None) -> list[int]:
        """The resourceVersions of the matching changes, in arrival order."""
        return [rv for rv, t, o in self.seen if o.get("kind") == kind and (etype is None or t == etype)
                and (when is None or when(o))]

    def first(self, kind: str, etype: str | None = None, *, when: Any = None) -> int:
        """The resourceVersion of the first matching change (a KeyError-like failure when none)."""
        found = self.matching(kind, etype, when=when)
        assert found, f"no {etype or ''} {kind} change matched"
        return min(found)

    async def caught_up(self, *, pods: int, job: Any) -> None:
        """The three watches are separate streams: a GET that says the cluster is gone does not mean
        each stream has delivered its last events yet. Wait for the cluster's DELETED, every Pod's
        DELETED and the cleanup Job's end on the streams themselves before reading their order."""
        async def seen() -> bool:
            return (len(self.matching("RayCluster", "DELETED")) == 1
                    and len(self.matching("Pod", "DELETED")) >= pods and bool(self.matching("Job", when=job)))
        await self.kube.eventually(seen, timeout=30, what=f"{self.name}'s watches caught up")

    def finalizer_before_pods(self) -> bool:
        finalized = min(rv for rv, _, o in self.seen if o.get("kind") == "RayCluster"
                        and FIN in (o["metadata"].get("finalizers") or []))
        first_pod = min(rv for rv, t, o in self.seen if o.get("kind") == "Pod" and t == "ADDED")
        return finalized < first_pod


async def _delete_and_wait_gone(kube: Kube, name: str, *, timeout: float = 60) -> None:
    await kube.c.delete(RC, namespace=NS, name=name)
    await kube.eventually(lambda: _gone(kube, name), timeout=timeout, what=f"{name} deleted")


def complete(o: dict[str, Any]) -> bool:
    return _job_condition(o, "Complete")


def failed(o: dict[str, Any]) -> bool:
    return _job_condition(o, "Failed")


def _job_condition(o: dict[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (o.get("status") or {}).get("conditions") or [])


async def test_gcs_ft_finalizer_cleanup_job_then_release(kube: Kube) -> None:
    name = "e2e-gcsft"
    recorder = _Recorder(kube, name)
    await recorder.start()
    try:
        await kube.c.create(RC, _ft_body(name), namespace=NS)
        await kube.wait_ready(name, workers=2, timeout=60)
        assert recorder.finalizer_before_pods()  # the finalizer is on the CR before the first Pod exists
        await _delete_and_wait_gone(kube, name)
        await recorder.caught_up(pods=3, job=complete)
    finally:
        await recorder.stop()

    head_gone = recorder.first("Pod", "DELETED", when=is_head)
    job_created = recorder.first("Job", "ADDED")
    job_complete = recorder.first("Job", when=complete)
    released = recorder.first("RayCluster", when=lambda o: FIN not in (o["metadata"].get("finalizers") or [])
                              and o["metadata"].get("deletionTimestamp"))
    # Pods first (head gone), then the Job, which finished before the finalizer went.
    assert head_gone < job_created < job_complete < released
    workers_gone = [rv for rv, t, o in recorder.seen if o.get("kind") == "Pod" and t == "DELETED"
                    and o["metadata"]["labels"].get("ray.io/node-type") == "worker"]
    assert len(workers_gone) == 2 and max(workers_gone) < released
    jobs = [o for _, t, o in recorder.seen if o.get("kind") == "Job" and t == "ADDED"]
    assert len(jobs) == 1 and jobs[0]["metadata"]["name"] == f"{name}-redis-cleanup"
    labels = jobs[0]["metadata"]["labels"]
    assert labels["ray.io/node-type"] == "redis-cleanup" and labels["app.kubernetes.io/created-by"] == "kuberay-operator"
    assert jobs[0]["spec"]["backoffLimit"] == 0 and jobs[0]["spec"]["activeDeadlineSeconds"] == 300
    assert await kube.event_count(name, "CreatedRedisCleanupJob") == 1


async def test_gcs_ft_failed_cleanup_job_still_releases(kube: Kube) -> None:
    name = "e2e-gcsft-fail"
    body = _ft_body(name)
    body["spec"]["headGroupSpec"]["template"].setdefault("metadata", {})["annotations"] = {
        "sim.raybus.io/exit-code": "1"}
    recorder = _Recorder(kube, name)
    await recorder.start()
    try:
        await kube.c.create(RC, body, namespace=NS)
        await kube.wait_ready(name, workers=2, timeout=60)
        await _delete_and_wait_gone(kube, name)
        await recorder.caught_up(pods=3, job=failed)
    finally:
        await recorder.stop()

    job_failed = recorder.first("Job", when=failed)
    released = recorder.first("RayCluster", when=lambda o: FIN not in (o["metadata"].get("finalizers") or [])
                              and o["metadata"].get("deletionTimestamp"))
    assert job_failed < released


async def _has_events(kube: Kube, name: str, reason: str) -> bool:
    return bool(await kube.events(name, reason))


async def test_gcs_ft_stuck_deletion_is_forced_after_the_timeout(kube: Kube) -> None:
    name = "e2e-gcsft-stuck"
    await kube.c.create(RC, _ft_body(name, **{"ray.io/gcs-ft-deletion-timeout": "3s"}), namespace=NS)
    await kube.wait_ready(name, workers=2, timeout=60)
    head = (await kube.pods(name, node_type="head"))[0]["metadata"]["name"]
    # A finalizer of someone else's keeps the head Pod terminating forever.
    await kube.c.merge_patch(POD, namespace=NS, name=head, patch={"metadata": {"finalizers": ["e2e/hold"]}})
    try:
        await _delete_and_wait_gone(kube, name, timeout=30)
        # The Event is recorded through its own limiter, after the finalizer's removal.
        await kube.eventually(lambda: _has_events(kube, name, "ForceDeletedStuckCluster"), timeout=15,
                              what="the ForceDeletedStuckCluster Event")
        (event,) = await kube.events(name, "ForceDeletedStuckCluster")
        assert event["type"] == "Warning" and "may need manual cleanup" in event["message"]
        jobs, _ = await kube.c.list_all(JOB, namespace=NS, label_selector=f"ray.io/cluster={name}")
        assert jobs == []  # the head never went away: no cleanup was started
    finally:
        await kube.c.merge_patch(POD, namespace=NS, name=head, patch={"metadata": {"finalizers": None}})


# --- item 5: status details ----------------------------------------------------------------------------------
async def test_head_pod_ready_carries_the_container_message(kube: Kube) -> None:
    name, image = "e2e-pullfail", "rayproject/ray:e2e-does-not-exist"
    await kube.sim("image-pull-failures", {"image": image})

    def mutate(body: dict[str, Any]) -> None:
        body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] = image

    await kube.apply_cluster(name, mutate=mutate)

    async def pulling() -> bool:
        cond = _conditions(await kube.cluster(name)).get("HeadPodReady") or {}
        return cond.get("reason") in ("ErrImagePull", "ImagePullBackOff")

    await kube.eventually(pulling, what="HeadPodReady image pull reason")
    cond = _conditions(await kube.cluster(name))["HeadPodReady"]
    assert f'ray-head: Back-off pulling image "{image}"' in cond["message"]


async def test_serve_star_ports_and_mig_gpus(kube: Kube) -> None:
    name = "e2e-serveports"

    def mutate(body: dict[str, Any]) -> None:
        body["metadata"]["annotations"] = {"ray.io/enable-serve-service": "true"}
        head = body["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
        head["ports"] = [*head["ports"], {"name": "serve", "containerPort": 8000},
                         {"name": "serve-grpc", "containerPort": 9000}]
        worker = body["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
        worker["resources"] = {"limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/mig-1g.5gb": "1"},
                               "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/mig-1g.5gb": "1"}}
        body["spec"]["workerGroupSpecs"][0].update(replicas=2, minReplicas=0, maxReplicas=5)

    await kube.apply_cluster(name, mutate=mutate)
    rc = await kube.wait_ready(name, workers=2, timeout=60)
    assert rc["status"]["desiredGPU"] == "2"
    svc = await kube.c.get(SERVICE, namespace=NS, name=f"{name}-serve-svc")
    assert sorted((p["name"], p["port"]) for p in svc["spec"]["ports"]) == [("serve", 8000), ("serve-grpc", 9000)]


# --- item 3: Kueue (no batch-scheduler plugin: KubeRay honours suspend and managedBy) --------------------------
async def test_kueue_suspended_cluster_waits_for_admission(kube: Kube) -> None:
    name = "e2e-kueue"

    def mutate(body: dict[str, Any]) -> None:
        body["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "user-queue"}
        body["spec"]["suspend"] = True

    await kube.apply_cluster(name, mutate=mutate)

    async def suspended() -> bool:
        return (await kube.cluster(name)).get("status", {}).get("state") == "suspended"

    await kube.eventually(suspended, what="suspended until admitted")
    assert await kube.pods(name) == []
    await kube.patch_cluster(name, {"spec": {"suspend": False}})  # what Kueue does on admission
    await kube.wait_ready(name, workers=1, timeout=60)
    remote = "e2e-multikueue"
    await kube.apply_cluster(remote, mutate=lambda b: b["spec"].update(managedBy="kueue.x-k8s.io/multikueue"))
    await kube.settled(remote)
    assert await kube.pods(remote) == [] and "status" not in await kube.cluster(remote)


# --- item 6: generateName ----------------------------------------------------------------------------------
async def test_generate_name_cluster_converges_as_rendered(kube: Kube) -> None:
    body = copy.deepcopy(SAMPLE)
    body["metadata"] = {"generateName": "e2e-gen-", "namespace": NS}
    text = yaml.safe_dump(body)
    objects, problems = render(text)
    assert problems == []
    created = await kube.c.create(RC, body, namespace=NS)
    name = created["metadata"]["name"]
    assert name.startswith("e2e-gen-") and len(name) == len("e2e-gen-") + 5
    workers = sum(1 for o in objects if o["kind"] == "Pod") - 1
    await kube.wait_ready(name, workers=workers, timeout=60)
    rendered_kinds = sorted(o["kind"] for o in objects)
    pods = await kube.pods(name)
    assert rendered_kinds.count("Pod") == len(pods)
