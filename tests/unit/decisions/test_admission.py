"""Executor admission (decisions/admission.py): every batch the real decision code produces for
KubeRay's samples (and for arbitrary RayCluster snapshots) is admitted against the world it was
decided on; forged batches of each kind are refused with a reason."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from raybus.api.load import parse_manifests
from raybus.api.raycluster import RayCluster
from raybus.api.rayjob import RayJob
from raybus.api.rayservice import RayService
from raybus.api.settings import FeatureGates
from raybus.decisions import admission as a
from raybus.decisions.admission.dashboard import admit_dashboard_command
from raybus.decisions.cluster.reconcile import ClusterSnapshot, reconcile_cluster, status_update
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.commands import Command, CreateObject, ObjectRef, PatchObject, UpdateStatus
from raybus.decisions.dashboard_contract import DashboardCommand
from raybus.decisions.job.model import JobDecision
from raybus.decisions.ray_events import EXPORT_ADDR_ENV, ExportSettings, cluster_token
from raybus.decisions.rayservice.model import ServiceDecision
from raybus.decisions.settings import DecisionSettings
from tests.conftest import SAMPLES
from tests.unit.decisions.cluster.test_reconcile_properties import snapshots
from tests.unit.decisions.job.world import EVENTS as JOB_WORLD_EVENTS
from tests.unit.decisions.job.world import World as JobWorld
from tests.unit.decisions.rayservice.test_samples import load
from tests.unit.decisions.rayservice.world import World as ServiceWorld
from tests.unit.decisions.rayservice.world import merge

Json = dict[str, Any]
T0 = datetime(2026, 1, 1, tzinfo=UTC)
CLUSTER_SETTINGS = [
    OperatorSettings(),
    OperatorSettings(batch_scheduler="volcano"),
    OperatorSettings(batch_scheduler="scheduler-plugins"),
    OperatorSettings(feature_gates=FeatureGates(ray_cluster_network_policy=True)),
    OperatorSettings(enable_deterministic_head_pod_name=True),
    # Head Pods that push Ray events carry a token bound to the RayCluster's uid: the executor
    # rebuilds them from the live object, whose uid is the one the reconciler built with.
    OperatorSettings(ray_events=ExportSettings(url="http://raybus-dashboard-poller:8266", key="k")),
]


def view(*objects: Json, gone: Iterable[str] = ()) -> a.StaticView:
    """The API server's objects as the executor's informers hold them (namespace defaulted)."""
    return a.StaticView(objects={(o["kind"], o["metadata"].get("namespace", "default"), o["metadata"]["name"]): o
                                 for o in objects}, gone_uids=frozenset(gone))


def verdict(controller: str, primary: Json, commands: list[Command], v: a.LiveView,
            settings: DecisionSettings | None = None) -> a.Verdict:
    kind = a.PRIMARY[controller][0]
    meta = primary["metadata"]
    return a.admit(controller=controller, kind=kind, namespace=meta["namespace"], name=meta["name"],
                   uid=meta.get("uid"), commands=commands, view=v, settings=settings)


def assert_admitted(controller: str, primary: Json, commands: list[Command], v: a.LiveView,
                    settings: DecisionSettings | None = None) -> None:
    result = verdict(controller, primary, commands, v, settings)
    assert result.admitted, (result.reason, result.detail)


def assert_sendable(controller: str, owner: Json, commands: Iterable[DashboardCommand], v: a.LiveView) -> None:
    """The dashboard-poller's admission lets every dashboard command of a real decision through."""
    meta = owner["metadata"]
    for command in commands:
        result = admit_dashboard_command(controller=controller, namespace=meta.get("namespace", "default"),
                                         name=meta["name"], uid=meta.get("uid"), command=command, view=v)
        assert result.admitted, (command.op, result.reason, result.detail)


# --- RayClusters: every sample's rounds until nothing more is created -----------------------------------
def _sample_clusters() -> list[tuple[str, Json]]:
    out: list[tuple[str, Json]] = []
    for path in sorted(SAMPLES.glob("*.yaml")):
        for i, obj in enumerate(parse_manifests(path.read_text())):
            if isinstance(obj, RayCluster):
                body = obj.to_manifest()
            elif isinstance(obj, RayJob | RayService) and obj.spec.ray_cluster_spec is not None:
                owner = obj.metadata.name or "gen"
                body = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
                        "metadata": {"name": f"{owner}-abcde", "ownerReferences": [
                            {"apiVersion": "ray.io/v1", "kind": obj.kind, "name": owner, "uid": "uid-owner",
                             "controller": True}]},
                        "spec": obj.spec.ray_cluster_spec.to_dict()}
            else:
                continue
            body["metadata"] = {**body["metadata"], "namespace": "default", "uid": f"uid-{path.stem}-{i}",
                                "resourceVersion": "5", "generation": 1}
            body["metadata"]["name"] = body["metadata"].get("name") or f"gen-{i}"
            out.append((f"{path.stem}/{i}", body))
    return out


CLUSTERS = _sample_clusters()


def _round(raw: Json, created: list[Json], cfg: OperatorSettings, entropy: str) -> tuple[Json, list[Json]]:
    """One reconcile_cluster on `created`; its batch (and status) must be admitted. Returns the
    RayCluster after its own patches, and what the round created."""
    of = {kind: [o for o in created if o["kind"] == kind] for kind in
          ("Pod", "Service", "Ingress", "ServiceAccount", "Role", "RoleBinding", "Secret", "Job",
           "NetworkPolicy", "PodGroup")}
    snap = ClusterSnapshot(cluster=RayCluster.model_validate(raw), pods=of["Pod"], services=of["Service"],
                           ingresses=of["Ingress"], service_accounts=of["ServiceAccount"], roles=of["Role"],
                           role_bindings=of["RoleBinding"], secrets=of["Secret"], jobs=of["Job"],
                           network_policies=of["NetworkPolicy"], pod_groups=of["PodGroup"])
    d = reconcile_cluster(snap, settings=cfg, now=T0, entropy=entropy)
    status = status_update(snap, d)
    assert_admitted("cluster", raw, [*d.commands, *([status] if status else [])], view(raw, *created),
                    DecisionSettings.of(cfg))
    for c in d.commands:
        if isinstance(c, PatchObject) and c.target.kind == "RayCluster":
            raw = merge(raw, c.merge_patch)
    return raw, copy.deepcopy([c.object for c in d.commands if isinstance(c, CreateObject)])


def drive_cluster(raw: Json, cfg: OperatorSettings) -> list[Json]:
    """Rounds until nothing more is created, then the deletion (GCS FT: the Pods deleted, then the
    Redis cleanup Job created): every batch admitted. Returns the objects created."""
    created: list[Json] = []
    for round_no in range(6):
        raw, new = _round(raw, created, cfg, f"e{round_no}")
        created += new
        if not new:
            break
    raw = merge(raw, {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}})
    raw, new = _round(raw, created, cfg, "d1")
    pods = [o for o in created + new if o["kind"] == "Pod"]
    created = [o for o in created + new if o["kind"] != "Pod"]
    raw, new = _round(raw, created, cfg, "d2")
    return pods + created + new


def test_samples_found() -> None:
    assert len(CLUSTERS) >= 60


@pytest.mark.parametrize(("name", "raw"), CLUSTERS, ids=[n for n, _ in CLUSTERS])
def test_sample_cluster_batches_are_admitted(name: str, raw: Json) -> None:
    for cfg in CLUSTER_SETTINGS:
        drive_cluster(raw, cfg)
    # ... and with the head Ingress (enableIngress) and autoscaling on
    drive_cluster(merge(raw, {"spec": {"enableInTreeAutoscaling": True, "headGroupSpec": {"enableIngress": True}}}),
                  OperatorSettings())


def test_head_pods_pushing_ray_events_are_admitted_only_for_the_live_uid() -> None:
    """The events token is the live RayCluster's uid's: a head Pod built for an earlier
    incarnation of the same name (its token dead) is not what the live object builds."""
    cfg = CLUSTER_SETTINGS[-1]
    name, raw = CLUSTERS[0]
    heads = [o for o in drive_cluster(raw, cfg)
             if o["kind"] == "Pod" and o["metadata"]["labels"].get("ray.io/node-type") == "head"]
    assert heads, name
    env = {e["name"]: e.get("value") for e in heads[0]["spec"]["containers"][0]["env"]}
    assert env[EXPORT_ADDR_ENV].endswith(
        "/" + cluster_token("k", "default", raw["metadata"]["name"], raw["metadata"]["uid"]))
    snap = ClusterSnapshot(cluster=RayCluster.model_validate(raw))
    (head,) = [c for c in reconcile_cluster(snap, settings=cfg, now=T0, entropy="f").commands
               if isinstance(c, CreateObject) and c.object["kind"] == "Pod"
               and c.object["metadata"]["labels"]["ray.io/node-type"] == "head"]
    assert_admitted("cluster", raw, [head], view(raw), DecisionSettings.of(cfg))
    stale = copy.deepcopy(head.object)
    for var in stale["spec"]["containers"][0]["env"]:
        if var["name"] == EXPORT_ADDR_ENV:
            var["value"] = var["value"].rsplit("/", 1)[0] + "/" + cluster_token(
                "k", "default", raw["metadata"]["name"], "uid-an-earlier-incarnation")
    result = verdict("cluster", raw, [head.model_copy(update={"object": stale})], view(raw), DecisionSettings.of(cfg))
    assert not result.admitted and result.reason == a.NOT_BUILT, (result.reason, result.detail)


def test_the_samples_exercise_every_kind_the_cluster_controller_creates() -> None:
    kinds: set[tuple[str, str]] = set()
    for _, raw in CLUSTERS:
        for cfg in CLUSTER_SETTINGS:
            kinds |= {(o["apiVersion"], o["kind"]) for o in drive_cluster(raw, cfg)}
        kinds |= {(o["apiVersion"], o["kind"]) for o in drive_cluster(
            merge(raw, {"spec": {"headGroupSpec": {"enableIngress": True}}}), OperatorSettings())}
    assert kinds == a.CREATES["cluster"]


GENERATIONS = itertools.count(1000)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_arbitrary_cluster_snapshots_are_admitted(case: tuple[ClusterSnapshot, OperatorSettings]) -> None:
    snap, cfg = case
    d = reconcile_cluster(snap, settings=cfg, now=T0, entropy="e")
    status = status_update(snap, d)
    raw = snap.cluster.to_manifest()
    # Each example is another spec of the same-named cluster: the API server would have bumped its
    # generation (admission builds once per generation).
    raw["metadata"]["generation"] = next(GENERATIONS)
    # In the API server every object of the cluster carries its ownerReference (the generated ones may not).
    ref = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": snap.cluster.name,
           "uid": snap.cluster.metadata.uid, "controller": True}
    owned = [merge(o, {"metadata": {"ownerReferences": [ref]}})
             for o in (*snap.pods, *snap.services, *snap.ingresses, *snap.network_policies, *snap.pod_groups)]
    assert_admitted("cluster", raw, [*d.commands, *([status] if status else [])], view(raw, *owned),
                    DecisionSettings.of(cfg))


# --- RayJobs and RayServices: their worlds, every decision checked before it is applied ------------------
class CheckedJobWorld(JobWorld):
    checked: int = 0

    def apply(self, d: JobDecision) -> None:
        clusters = [{"kind": "RayCluster", **c, "metadata": {"namespace": "default", **c["metadata"]}}
                    for c in self.clusters.values()]
        ref = ObjectRef(api_version="ray.io/v1", kind="RayJob", namespace=self.job["metadata"]["namespace"],
                        name=self.job["metadata"]["name"], uid=self.job["metadata"]["uid"])
        status = [UpdateStatus(reason="status", target=ref, status=d.status)] if d.status is not None else []
        # The submitter Job is in the executor's view too (the job controller deletes it on suspend).
        owned = [{"kind": "Job", **self.submitter}] if self.submitter is not None else []
        assert_admitted("job", self.job, [*d.commands, *status], view(self.job, *clusters, *owned))
        assert_sendable("job", self.job, d.dashboard_commands, view(self.job, *clusters))
        self.checked += 1
        super().apply(d)


class CheckedServiceWorld(ServiceWorld):
    checked: int = 0

    def _cluster_ref(self, name: str) -> Json:
        """A head Pod's controller reference (the world's Pods are made without one)."""
        uid = self.clusters[name]["metadata"]["uid"] if name in self.clusters else f"uid-gone-{name}"
        return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": name, "uid": uid, "controller": True}

    def apply(self, d: ServiceDecision) -> None:
        ref = ObjectRef(api_version="ray.io/v1", kind="RayService", namespace="default",
                        name=self.service["metadata"]["name"], uid=self.service["metadata"]["uid"])
        status = [UpdateStatus(reason="status", target=ref, status=d.status)] if d.status is not None else []
        pods = [merge(p, {"metadata": {"ownerReferences": [self._cluster_ref(p["metadata"]["labels"]["ray.io/cluster"])]}})
                for p in self.pods.values()]
        assert_admitted("service", self.service, [*d.commands, *status],
                        view(self.service, *self.clusters.values(), *pods, *self.services.values(),
                             *self.gateways.values(), *self.routes.values()))
        assert_sendable("service", self.service, d.dashboard_commands, view(self.service, *self.clusters.values()))
        self.checked += 1
        super().apply(d)


JOB_SPECS = [{"submissionMode": m} for m in ("K8sJobMode", "HTTPMode", "SidecarMode", "InteractiveMode")] + [
    {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 0},
    {"backoffLimit": 2},
    {"clusterSelector": {"ray.io/cluster": "shared"}},
    {"deletionStrategy": {"deletionRules": [
        {"policy": "DeleteWorkers", "condition": {"jobStatus": "FAILED", "ttlSeconds": 0}},
        {"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED", "ttlSeconds": 5}},
        {"policy": "DeleteSelf", "condition": {"jobDeploymentStatus": "Failed", "ttlSeconds": 10}}]}},
]
JOB_EVENTS = list(JOB_WORLD_EVENTS)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(JOB_SPECS), st.lists(st.tuples(st.sampled_from(JOB_EVENTS), st.integers(0, 30)),
                                            max_size=40))
# Suspended after its submitter Job was created: the Job's deletion is admitted.
@example({"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 0},
         [("poll", 0), ("poll", 0), ("cluster_ready", 0), ("toggle_suspend", 0), ("poll", 0)])
def test_rayjob_decisions_are_admitted(spec: Json, events: list[tuple[str, int]]) -> None:
    world = CheckedJobWorld(spec)
    world.step()
    for name, arg in events:
        world.event(name, arg)
        world.step()
    assert world.checked >= 1


SERVICE_FILES = sorted(SAMPLES.glob("ray-service.*.yaml"))


@pytest.mark.parametrize("path", SERVICE_FILES, ids=[p.name for p in SERVICE_FILES])
def test_rayservice_sample_decisions_are_admitted(path: Path) -> None:
    w = CheckedServiceWorld(load(path))
    for round_no in range(130):
        d = w.step()
        w.start_heads()
        w.program_gateway()
        if round_no == 30:  # a cluster-spec change: a pending cluster, promotion, the old one deleted
            head = w.service["spec"]["rayClusterConfig"]["headGroupSpec"]
            container = dict(head["template"]["spec"]["containers"][0])
            container["env"] = [*(container.get("env") or []), {"name": "UPGRADE", "value": "1"}]
            w.update_spec(rayClusterConfig={"headGroupSpec": {"template": {"spec": {
                **head["template"]["spec"], "containers": [container, *head["template"]["spec"]["containers"][1:]]}}}})
        if round_no == 115:  # suspension deletes every owned object (suspend.py)
            w.update_spec(suspend=True)
        if round_no in (100, 114):
            w.advance(3600)
        elif d.requeue_after:
            w.advance(d.requeue_after)
    assert w.checked >= 120 and len(w.deleted_clusters) >= 2 and not w.clusters
