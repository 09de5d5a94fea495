"""What raybus asks of the Kubernetes API, derived from its code (not a hand-written list).

- Commands: the decision code's output for every KubeRay sample cluster (RayClusters, and the ones
  RayJobs/RayServices embed) reconciled to convergence and through scale-down, suspend and
  autoscaler workersToDelete; and for RayJobs/RayServices the decision worlds of their unit tests
  driven through seeded random histories. Decided statuses become the UpdateStatus commands the
  runtime sends (the runtime's contract: "return the full status dict, the executor writes it").
- API calls: every distinct (op, kind) command is applied by the real command-executor (its Executor)
  against a recording KubeClient, twice (the second time its Event recorder patches the Event), so
  the HTTP method + path of each call is what the executor really sends.
- The watcher's calls: the real Informer of every WatchSpec in services/watcher/watcher/routing.py
  lists and watches against the same recording client.
"""

from __future__ import annotations

import copy
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from command_executor.executor import Executor
from raybus.adapters.informer import Informer
from raybus.adapters.kube import KubeClient, Resource, WatchEvent
from raybus.api.raycluster import RayCluster
from raybus.bus.envelopes import CommandBatch, ObjectKey
from raybus.decisions.cluster.reconcile import ClusterSnapshot, reconcile_cluster, status_update
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import Command, ObjectRef, UpdateStatus
from tests.unit.decisions.cluster.test_pod_samples import CLUSTERS
from tests.unit.decisions.cluster.test_reconcile_helpers import apply
from tests.unit.decisions.job import world as job_world
from tests.unit.decisions.rayservice import test_incremental as service_incremental
from tests.unit.decisions.rayservice import test_properties as service_props
from tests.unit.decisions.rayservice import world as service_world
from watcher.routing import WATCHES

Json = dict[str, Any]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, order=True)
class Call:
    """One API request: HTTP method, path, and whether it is a watch."""

    method: str
    path: str
    watch: bool = False

    def attributes(self) -> tuple[str, str, str, str, str]:
        """(verb, apiGroup, resource, subresource, name) as kube-apiserver's RequestInfo derives them."""
        parts = [p for p in self.path.split("/") if p]
        group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
        if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) > 2:
            rest = rest[2:]
        resource, name, sub = rest[0], rest[1] if len(rest) > 1 else "", rest[2] if len(rest) > 2 else ""
        if self.method == "GET":
            verb = "watch" if self.watch else ("get" if name else "list")
        elif self.method == "DELETE":
            verb = "delete" if name else "deletecollection"
        else:
            verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}[self.method]
        return verb, group, resource, sub, name


# --- commands from the decision code -------------------------------------------------------------------
def _cluster_commands() -> list[Command]:
    settings = OperatorSettings()
    out: list[Command] = []

    def converge(snapshot: ClusterSnapshot, start: int) -> ClusterSnapshot:
        for i in range(8):
            d = reconcile_cluster(snapshot, settings=settings, now=T0 + timedelta(seconds=start + i * 5),
                                  entropy=f"e{i}")
            out.extend(d.commands)
            update = status_update(snapshot, d)
            if update is not None:
                out.append(update)
            snapshot = apply(snapshot, d)
        return snapshot

    for _, cluster in CLUSTERS:
        snapshot = converge(ClusterSnapshot(cluster=cluster), 0)
        body = snapshot.cluster.to_manifest()
        groups = body["spec"].get("workerGroupSpecs") or []
        pods = [p for p in snapshot.pods if (p["metadata"].get("labels") or {}).get("ray.io/node-type") == "worker"]
        if groups and pods:  # the autoscaler names workers to delete: deletes + the workersToDelete patch
            groups[0]["scaleStrategy"] = {"workersToDelete": [pods[0]["metadata"]["name"]]}
            groups[0]["replicas"] = max(0, int(groups[0].get("replicas") or 1) - 1)
            snapshot = converge(snapshot.model_copy(update={"cluster": RayCluster.model_validate(body)}), 100)
        body = snapshot.cluster.to_manifest()
        body["spec"]["suspend"] = True  # suspension deletes every pod
        converge(snapshot.model_copy(update={"cluster": RayCluster.model_validate(body)}), 200)
    return out


def _ref(kind: str, name: str) -> ObjectRef:
    return ObjectRef(api_version="ray.io/v1", kind=kind, namespace="default", name=name, uid=f"uid-{name}")


class _JobWorld(job_world.World):
    seen: list[Command]

    def apply(self, d: Any) -> None:
        self.seen.extend(d.commands)
        if d.status is not None:
            self.seen.append(UpdateStatus(reason="RayJob status", target=_ref("RayJob", "job"), status=d.status))
        super().apply(d)


class _ServiceWorld(service_world.World):
    seen: list[Command]

    def apply(self, d: Any) -> None:
        self.seen.extend(d.commands)
        if d.status is not None:
            self.seen.append(UpdateStatus(reason="RayService status", target=_ref("RayService", "svc"),
                                          status=d.status))
        super().apply(d)


JOB_SPECS: list[Json] = [
    {"submissionMode": mode, **extra}
    for mode in ("K8sJobMode", "HTTPMode", "SidecarMode", "InteractiveMode")
    for extra in ({}, {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 0}, {"backoffLimit": 1},
                  {"deletionStrategy": {"deletionRules": [
                      {"policy": "DeleteWorkers", "condition": {"jobStatus": "FAILED", "ttlSeconds": 0}},
                      {"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 0}},
                      {"policy": "DeleteSelf", "condition": {"jobDeploymentStatus": "Failed", "ttlSeconds": 0}}]}})
    if not (mode == "InteractiveMode" and "backoffLimit" in extra)]


def _job_commands(histories: int) -> list[Command]:
    seen: list[Command] = []
    rng = random.Random(9)
    for spec in JOB_SPECS:
        for _ in range(histories):
            w = _JobWorld(copy.deepcopy(spec))
            w.seen = seen
            w.step()
            for _ in range(40):
                w.event(rng.choice(job_world.EVENTS), rng.randint(0, 30))
                w.step()
    return seen


def _service_commands(histories: int) -> list[Command]:
    seen: list[Command] = []
    rng = random.Random(9)
    actions = list(service_props.ACTIONS.elements)  # the actions of the RayService property tests
    for _ in range(histories):
        w = _ServiceWorld(service_world.make_service())
        w.seen = seen
        w.settle()
        for _ in range(40):
            action = rng.choice(actions)
            if action == "step":
                w.step()
            else:
                service_props.act(w, action, rng.randint(0, 1000))
    # NewClusterWithIncrementalUpgrade: Gateway/HTTPRoute, then a spec change moving traffic over
    w = _ServiceWorld(service_incremental.manifest())
    w.seen = seen
    for round_ in range(40):
        if round_ == 10:
            w.update_spec(rayClusterConfig={"headGroupSpec": {"template": service_world.head_template(
                env=[{"name": "A", "value": "1"}])}})
        d = w.step()
        w.start_heads()
        w.program_gateway()
        if d.requeue_after:
            w.advance(d.requeue_after)
    return seen


def decided_commands(*, histories: int = 3) -> list[Command]:
    return _cluster_commands() + _job_commands(histories) + _service_commands(histories)


# --- API calls the executor and the watcher make ----------------------------------------------------------
class RecordingKube(KubeClient):
    """A KubeClient whose HTTP layer records each request and answers it successfully."""

    def __init__(self) -> None:
        super().__init__(api=None)  # type: ignore[arg-type]
        self.calls: list[Call] = []
        self.uid: str | None = None

    async def _call(self, method: str, path: str, *, query: list[tuple[str, str]] | None = None,
                    body: object = None, content_type: str = "application/json",
                    accept: str = "application/json") -> Json:
        self.calls.append(Call(method, path.split("?")[0]))
        name = path.rstrip("/").split("/")[-1]
        return {"metadata": {"name": name, "namespace": "default", "uid": self.uid or "uid", "resourceVersion": "1"},
                "items": []}

    async def watch(self, res: Resource, *, resource_version: str, namespace: str | None = None,
                    label_selector: str | None = None, timeout_s: int = 300,
                    metadata_only: bool = False) -> AsyncIterator[WatchEvent]:
        self.calls.append(Call("GET", res.path(namespace=namespace), watch=True))
        return
        yield  # an async generator that ends at once


def _key(cmd: Command) -> tuple[str, str, str]:
    if hasattr(cmd, "object"):
        return cmd.op, str(cmd.object.get("apiVersion")), str(cmd.object.get("kind"))
    target = cmd.target  # type: ignore[union-attr]
    return cmd.op, target.api_version, target.kind


async def executor_calls(commands: list[Command]) -> tuple[set[Call], list[str]]:
    """The API calls the real Executor makes for each distinct (op, kind) command; failures it reports."""
    kube = RecordingKube()
    executor = Executor(kube, events_kube=kube, host="rbac-test")
    failures: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for cmd in commands:
        if _key(cmd) in seen:
            continue
        seen.add(_key(cmd))
        kube.uid = getattr(getattr(cmd, "target", None), "uid", None)
        batch = CommandBatch(key=ObjectKey(namespace="default", name="x"), kind="raycluster", uid="uid-x",
                             controller="cluster", reconcile_id=f"r-{len(seen)}", commands=[cmd])
        for _ in range(2):  # the second time the Event recorder patches the Event it created
            result = await executor.apply(batch)
            failures += [f"{r.op} {r.target}: {r.message}" for r in result.results if not r.ok]
    return set(kube.calls), failures


async def watcher_calls() -> set[Call]:
    kube = RecordingKube()

    async def sink(etype: str, obj: Json, old: Json | None) -> bool:
        return True
    for spec in WATCHES:
        informer = Informer(kube, spec, sink=sink)
        await informer.relist(why="initial")
        await informer._watch_once()
    return set(kube.calls)
