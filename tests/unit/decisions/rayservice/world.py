"""A tiny deterministic world for driving ``reconcile_rayservice`` round after round.

It plays the API server (applies the decision's commands and status), the RayCluster controller and
kubelet (head Pods appear, become Ready), the Ray dashboard (PutServeConfig -> applications RUNNING,
proxy health) and the EndpointSlice controller (ready Pods selected by the serve Services). Only what
the RayService decision reads is modelled; every step is explicit so tests can interleave faults.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from raybus.api.rayservice import RayService
from raybus.decisions.commands import CreateObject, DeleteObject, PatchObject, RecordEvent
from raybus.decisions.dashboard_contract import (
    ClusterObservation,
    DashboardCommandResult,
    PutServeConfig,
    ServeAppObservation,
)
from raybus.decisions.rayservice.model import (
    CommandFailure,
    DashboardOutcome,
    ServeConfigCacheEntry,
    ServiceDecision,
    ServiceSettings,
    ServiceSnapshot,
    TimedObservation,
)
from raybus.decisions.rayservice.reconcile import reconcile_rayservice

Json = dict[str, Any]
T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
SERVE_CONFIG = """applications:
  - name: fruit_app
    import_path: fruit.deployment_graph
    route_prefix: /fruit
  - name: math_app
    import_path: conditional_dag.serve_dag
    route_prefix: /calc
"""


def head_template(image: str = "rayproject/ray:2.52.0", env: list[Json] | None = None) -> Json:
    container: Json = {"name": "ray-head", "image": image}
    if env:
        container["env"] = env
    return {"spec": {"containers": [container]}}


def make_service(name: str = "rayservice-sample", *, serve_config: str = SERVE_CONFIG, spec: Json | None = None,
                 annotations: dict[str, str] | None = None, generation: int = 1) -> Json:
    body: Json = {
        "serveConfigV2": serve_config,
        "rayClusterConfig": {
            "rayVersion": "2.52.0",
            "headGroupSpec": {"rayStartParams": {}, "template": head_template()},
            "workerGroupSpecs": [{"groupName": "small-group", "replicas": 1, "minReplicas": 1, "maxReplicas": 5,
                                  "rayStartParams": {},
                                  "template": {"spec": {"containers": [{"name": "ray-worker",
                                                                        "image": "rayproject/ray:2.52.0"}]}}}],
        },
    }
    body.update(spec or {})
    # The first reconcile of a new RayService only adds ray.io/rayservice-finalizer (test_finalizer.py
    # covers that step); the world starts after it.
    meta: Json = {"name": name, "namespace": "default", "uid": f"uid-{name}", "generation": generation,
                  "finalizers": ["ray.io/rayservice-finalizer"]}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": meta, "spec": body}


def merge(target: Json, patch: Json) -> Json:
    out = copy.deepcopy(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@dataclass
class World:
    service: Json
    settings: ServiceSettings = field(default_factory=ServiceSettings)
    now: datetime = T0
    clusters: dict[str, Json] = field(default_factory=dict)
    pods: dict[str, Json] = field(default_factory=dict)
    services: dict[str, Json] = field(default_factory=dict)
    gateways: dict[str, Json] = field(default_factory=dict)
    routes: dict[str, Json] = field(default_factory=dict)
    apps: dict[str, dict[str, ServeAppObservation]] = field(default_factory=dict)  # per cluster
    reachable: dict[str, bool] = field(default_factory=dict)
    observed_at: dict[str, datetime] = field(default_factory=dict)
    proxy: dict[str, bool] = field(default_factory=dict)  # head pod -> healthy
    cache: dict[str, ServeConfigCacheEntry] = field(default_factory=dict)
    deadlines: dict[str, datetime] = field(default_factory=dict)
    outcomes: list[DashboardOutcome] = field(default_factory=list)
    failures: list[CommandFailure] = field(default_factory=list)
    events: list[RecordEvent | str] = field(default_factory=list)
    puts: list[PutServeConfig] = field(default_factory=list)
    deleted_clusters: list[tuple[str, datetime]] = field(default_factory=list)
    dashboard_fails: bool = False
    auto_dashboard: bool = True  # serve apps appear right after a PutServeConfig
    history: list[ServiceDecision] = field(default_factory=list)
    _uids: itertools.count[int] = field(default_factory=itertools.count)

    # --- the decision ------------------------------------------------------------------------------
    def snapshot(self) -> ServiceSnapshot:
        obs = {name: TimedObservation(
            observation=ClusterObservation(namespace="default", cluster=name, reachable=self.reachable.get(name, True),
                                           serve_apps=self.apps.get(name),
                                           proxy_healthy={p: h for p, h in self.proxy.items()
                                                          if self.pods.get(p, {}).get("metadata", {}).get("labels", {}).get("ray.io/cluster") == name}),
            observed_at=self.observed_at.get(name)) for name in self.clusters if name in self.apps or self.head_of(name)}
        return ServiceSnapshot(service=RayService.model_validate(self.service), clusters=list(self.clusters.values()),
                               pods=list(self.pods.values()), services=list(self.services.values()),
                               gateways=list(self.gateways.values()), http_routes=list(self.routes.values()),
                               endpoint_slices=self.endpoint_slices(), observations=obs,
                               serve_config_cache=dict(self.cache), deletion_deadlines=dict(self.deadlines),
                               dashboard_results=list(self.outcomes), failed_commands=list(self.failures))

    def decide(self) -> ServiceDecision:
        return reconcile_rayservice(self.snapshot(), settings=self.settings, now=self.now)

    def step(self) -> ServiceDecision:
        decision = self.decide()
        self.history.append(decision)
        self.outcomes, self.failures = [], []
        self.apply(decision)
        return decision

    def apply(self, d: ServiceDecision) -> None:
        for cmd in d.commands:
            if isinstance(cmd, RecordEvent):
                self.events.append(cmd)
            elif isinstance(cmd, CreateObject):
                self.create(cmd.object)
                if cmd.event_reason:
                    self.events.append(cmd.event_reason)
            elif isinstance(cmd, DeleteObject):
                self.delete(cmd.target.kind, cmd.target.name)
                if cmd.event_reason:
                    self.events.append(cmd.event_reason)
            elif isinstance(cmd, PatchObject) and cmd.target.kind == "RayService":
                self.service = merge(self.service, cmd.merge_patch)
            elif isinstance(cmd, PatchObject):
                store = {"RayCluster": self.clusters, "Service": self.services, "Pod": self.pods,
                         "Gateway": self.gateways, "HTTPRoute": self.routes}[cmd.target.kind]
                store[cmd.target.name] = merge(store[cmd.target.name], cmd.merge_patch)
                if cmd.event_reason:
                    self.events.append(cmd.event_reason)
        if d.status is not None:
            self.service = {**self.service, "status": d.status}
        for name, entry in d.serve_config_cache.items():
            if entry is None:
                self.cache.pop(name, None)
            else:
                self.cache[name] = entry
        for name, deadline in d.deletion_deadlines.items():
            if deadline is None:
                self.deadlines.pop(name, None)
            else:
                assert name not in self.deadlines or self.deadlines[name] == deadline, "deadline moved"
                self.deadlines[name] = deadline
        for put in d.dashboard_commands:
            assert isinstance(put, PutServeConfig)
            self.puts.append(put)
            ok = not self.dashboard_fails and put.cluster in self.clusters
            state = "ok" if ok else "failed"
            self.outcomes.append(DashboardOutcome(command=put, finished_at=self.now, result=DashboardCommandResult(
                command_id=str(len(self.puts)), op=put.op, cluster=put.cluster, state=state,
                message="" if ok else "connection refused")))
            if ok and self.auto_dashboard:
                self.deploy(put.cluster, put.config)

    # --- the API server -------------------------------------------------------------------------------
    def create(self, obj: Json) -> None:
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        meta.setdefault("uid", f"uid-{next(self._uids)}")
        store = {"RayCluster": self.clusters, "Service": self.services, "Gateway": self.gateways,
                 "HTTPRoute": self.routes}[obj["kind"]]
        assert meta["name"] not in store, f"create of existing {obj['kind']} {meta['name']}"
        store[meta["name"]] = obj

    def delete(self, kind: str, name: str) -> None:
        if kind == "RayCluster" and name in self.clusters:
            self.clusters.pop(name)
            self.deleted_clusters.append((name, self.now))
            for pod in [p for p, x in self.pods.items() if x["metadata"]["labels"]["ray.io/cluster"] == name]:
                self.pods.pop(pod)
            self.apps.pop(name, None)
        elif kind in ("Service", "Gateway", "HTTPRoute"):
            {"Service": self.services, "Gateway": self.gateways, "HTTPRoute": self.routes}[kind].pop(name, None)

    def update_spec(self, **changes: Any) -> None:
        spec = merge(self.service["spec"], changes)
        meta = {**self.service["metadata"], "generation": self.service["metadata"]["generation"] + 1}
        self.service = {**self.service, "metadata": meta, "spec": spec}

    def set_annotation(self, key: str, value: str) -> None:
        meta = copy.deepcopy(self.service["metadata"])
        meta.setdefault("annotations", {})[key] = value
        self.service = {**self.service, "metadata": meta}

    # --- RayCluster controller + kubelet + dashboard ------------------------------------------------------
    def head_of(self, cluster: str) -> str | None:
        return next((p for p, x in self.pods.items() if x["metadata"]["labels"]["ray.io/cluster"] == cluster), None)

    def start_heads(self) -> None:
        """Every cluster gets a Running+Ready head Pod and HeadPodReady=True."""
        for name, cluster in self.clusters.items():
            if self.head_of(name) is None:
                pod = f"{name}-head-{next(self._uids)}"
                self.pods[pod] = {"apiVersion": "v1", "kind": "Pod",
                                  "metadata": {"name": pod, "namespace": "default", "uid": f"uid-{pod}",
                                               "labels": {"ray.io/cluster": name, "ray.io/node-type": "head"}},
                                  "spec": {"containers": [{"name": "ray-head"}]},
                                  "status": {"phase": "Running", "podIP": f"10.0.0.{len(self.pods)}",
                                             "conditions": [{"type": "Ready", "status": "True"}]}}
                self.proxy[pod] = True
            cluster["status"] = {"conditions": [{"type": "HeadPodReady", "status": "True"}], "state": "ready"}
            self.reachable.setdefault(name, True)
            self.apps.setdefault(name, {})
            self.observed_at.setdefault(name, self.now)

    def restart_head(self, cluster: str) -> None:
        """Head Pod replaced (no GCS FT): the applications are gone."""
        old = self.head_of(cluster)
        if old:
            self.pods.pop(old)
            self.proxy.pop(old, None)
        self.apps[cluster] = {}
        self.observed_at[cluster] = self.now
        self.start_heads()

    def deploy(self, cluster: str, config: Json) -> None:
        self.apps[cluster] = {str(app.get("name", "")): ServeAppObservation(status="RUNNING")
                              for app in config.get("applications") or []}
        self.observed_at[cluster] = self.now

    def program_gateway(self) -> None:
        """The Gateway controller accepts the Gateway and the HTTPRoute."""
        for gw in self.gateways.values():
            gw["status"] = {"conditions": [{"type": "Accepted", "status": "True"},
                                           {"type": "Programmed", "status": "True"}]}
            for route in self.routes.values():
                route["status"] = {"parents": [{"parentRef": {"name": gw["metadata"]["name"], "namespace": "default"},
                                                "conditions": [{"type": "Accepted", "status": "True"},
                                                               {"type": "ResolvedRefs", "status": "True"}]}]}

    def endpoint_slices(self) -> list[Json]:
        """One slice per Service: ready Pods matching its selector."""
        out = []
        for name, svc in self.services.items():
            selector = (svc.get("spec") or {}).get("selector") or {}
            endpoints = [{"conditions": {"ready": True}, "targetRef": {"kind": "Pod", "uid": p["metadata"]["uid"]}}
                         for p in self.pods.values()
                         if selector and all(p["metadata"]["labels"].get(k) == v for k, v in selector.items())]
            out.append({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                        "metadata": {"name": f"{name}-abc", "namespace": "default",
                                     "labels": {"kubernetes.io/service-name": name}},
                        "endpoints": endpoints})
        return out

    def settle(self, rounds: int = 12) -> ServiceDecision:
        """Let the cluster/dashboard catch up and decide until nothing changes (or ``rounds``)."""
        decision = self.step()
        for _ in range(rounds):
            self.start_heads()
            decision = self.step()
            if not decision.commands and not decision.dashboard_commands and decision.status is None \
                    and decision.error is None and not self.outcomes:
                break
        return decision

    # --- reading ---------------------------------------------------------------------------------------
    @property
    def status(self) -> Json:
        return self.service.get("status") or {}

    def name(self, role: str) -> str:
        return str((self.status.get(f"{role}ServiceStatus") or {}).get("rayClusterName") or "")

    def condition(self, type_: str) -> Json:
        return next((x for x in self.status.get("conditions") or [] if x["type"] == type_), {})

    def selector_cluster(self, svc: str) -> str | None:
        value = ((self.services.get(svc) or {}).get("spec") or {}).get("selector", {}).get("ray.io/cluster")
        return str(value) if value is not None else None

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
