"""KubeRay v1.7's operator metrics (ray-operator/controllers/ray/metrics), same names, labels and
meaning, exported by the reconciler replicas.

KubeRay computes `kuberay_*_info`, `kuberay_*_condition_*` and `kuberay_job_deployment_status` at
scrape time from its informer cache (a prometheus Collector listing every object). raybus does the
same from each reconciler's snapshot cache, but a replica yields only the objects of the partitions
whose lease it currently holds: with several replicas each series is exported by exactly one.

The two durations are GaugeVecs in KubeRay (not histograms), set when a status transition is
written and deleted when the object is gone (`DeleteRayClusterMetrics`/`DeleteRayJobMetrics`).
Here every replica's cache sees each transition the watcher publishes after the status write
succeeded (KubeRay emits after a successful `Status().Update`), remembers the value, and exports
it under the same partition filter: kept by whichever replica takes the partition over, and
forgotten when the object's DELETED event arrives. A GaugeVec keeps one series per label set, so
a RayJob that retried keeps its `Retrying` series beside the final one, as KubeRay's does.

A process that first sees an object already past its transition (a restart, a rolling update, a
replica started later) has no transition to time: it takes the value from the timestamps the
same status write recorded (the RayClusterProvisioned condition's lastTransitionTime, a terminal
RayJob's endTime), to the second, so the gauges outlive any one process as they outlive none in
KubeRay. A RayJob's earlier `Retrying` series cannot be rebuilt that way and is exported only by
processes that saw it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any

from prometheus_client.core import REGISTRY, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

Json = dict[str, Any]
# utils.RayOriginatedFromCRDLabelKey: the CRD that created a RayCluster (absent: "None").
ORIGINATED_FROM_CRD = "ray.io/originated-from-crd"
TERMINAL_JOB_STATES = ("Complete", "Failed")  # rayv1.IsJobDeploymentTerminal
RETRYING = "Retrying"

CLUSTER_PROVISIONED = "kuberay_cluster_provisioned_duration_seconds"
JOB_EXECUTION = "kuberay_job_execution_duration_seconds"
# name -> (help, label names), KubeRay's wording.
FAMILIES: dict[str, tuple[str, list[str]]] = {
    CLUSTER_PROVISIONED: (("The time, in seconds, when a RayCluster's `RayClusterProvisioned` status "
                           "transitions from false (or unset) to true"), ["name", "namespace", "uid"]),
    "kuberay_cluster_info": ("Metadata information about RayCluster custom resources",
                             ["name", "namespace", "uid", "owner_kind"]),
    "kuberay_cluster_condition_provisioned": ("Indicates whether the RayCluster is provisioned",
                                              ["name", "namespace", "uid", "condition"]),
    JOB_EXECUTION: (("Duration from when the RayJob CR’s JobDeploymentStatus transitions from "
                     "Initializing to either the Retrying state or a terminal state, such as Complete "
                     "or Failed. The Retrying state indicates that the CR previously failed and that "
                     "spec.backoffLimit is enabled."),
                    ["name", "namespace", "uid", "job_deployment_status", "retry_count"]),
    "kuberay_job_info": ("Metadata information about RayJob custom resources",
                         ["name", "namespace", "uid"]),
    "kuberay_job_deployment_status": ("The RayJob's current deployment status",
                                      ["name", "namespace", "uid", "deployment_status"]),
    "kuberay_service_info": ("Metadata information about RayService custom resources",
                             ["name", "namespace", "uid"]),
    "kuberay_service_condition_ready": (
        ("Describes whether the RayService is ready. Ready means users can send requests to the "
         "underlying cluster and the number of serve endpoints is greater than 0."),
        ["name", "namespace", "uid", "condition"]),
    "kuberay_service_condition_upgrade_in_progress": (
        "Describes whether the RayService is performing a zero-downtime upgrade.",
        ["name", "namespace", "uid", "condition"]),
}
# Which families each kind's exporter yields (KubeRay's three MetricsManagers).
KIND_FAMILIES = {
    "RayCluster": [CLUSTER_PROVISIONED, "kuberay_cluster_info", "kuberay_cluster_condition_provisioned"],
    "RayJob": [JOB_EXECUTION, "kuberay_job_info", "kuberay_job_deployment_status"],
    "RayService": ["kuberay_service_info", "kuberay_service_condition_ready",
                   "kuberay_service_condition_upgrade_in_progress"],
}
Sample = tuple[str, list[str], float]  # family, label values, value


def condition_true(obj: Json | None, cond_type: str) -> bool:
    """meta.IsStatusConditionTrue."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == cond_type:
            return bool(cond.get("status") == "True")
    return False


def _meta(obj: Json) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("name") or ""), str(meta.get("namespace") or ""), str(meta.get("uid") or "")


def _timestamp(value: object) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value).timestamp()  # RFC 3339, "Z" included
    except ValueError:
        return None


def object_samples(kind: str, obj: Json) -> list[Sample]:
    """The scrape-time series of one object (KubeRay's collect* functions)."""
    name, ns, uid = _meta(obj)
    if kind == "RayCluster":
        owner = ((obj.get("metadata") or {}).get("labels") or {}).get(ORIGINATED_FROM_CRD) or "None"
        provisioned = str(condition_true(obj, "RayClusterProvisioned")).lower()
        return [("kuberay_cluster_info", [name, ns, uid, owner], 1.0),
                ("kuberay_cluster_condition_provisioned", [name, ns, uid, provisioned], 1.0)]
    if kind == "RayJob":
        status = str((obj.get("status") or {}).get("jobDeploymentStatus") or "")
        return [("kuberay_job_info", [name, ns, uid], 1.0),
                ("kuberay_job_deployment_status", [name, ns, uid, status], 1.0)]
    if kind == "RayService":
        ready = str(condition_true(obj, "Ready")).lower()
        upgrading = str(condition_true(obj, "UpgradeInProgress")).lower()
        return [("kuberay_service_info", [name, ns, uid], 1.0),
                ("kuberay_service_condition_ready", [name, ns, uid, ready], 1.0),
                ("kuberay_service_condition_upgrade_in_progress", [name, ns, uid, upgrading], 1.0)]
    return []


def transition_sample(kind: str, old: Json | None, new: Json, now: float) -> Sample | None:
    """The duration gauge a status change sets, or None (KubeRay's emit*Duration conditions).
    `old` None means first sight (snapshot load, a replica started later): then the value the
    transition's own timestamps give, if the object is already past it (recorded_sample)."""
    if old is None:
        return recorded_sample(kind, new)
    name, ns, uid = _meta(new)
    if kind == "RayCluster":
        # emitRayClusterProvisionedDuration: false (or unset) -> true; time.Since(creationTimestamp)
        if condition_true(old, "RayClusterProvisioned") or not condition_true(new, "RayClusterProvisioned"):
            return None
        created = _timestamp((new.get("metadata") or {}).get("creationTimestamp"))
        if created is None:
            return None
        return CLUSTER_PROVISIONED, [name, ns, uid], now - created
    if kind == "RayJob":
        # emitRayJobExecutionDuration: non-terminal -> terminal or Retrying;
        # retry_count = the old status.failed; time.Since(status.startTime)
        old_status, new_status = old.get("status") or {}, new.get("status") or {}
        before = old_status.get("jobDeploymentStatus") or ""
        after = new_status.get("jobDeploymentStatus") or ""
        if before in TERMINAL_JOB_STATES or (after not in TERMINAL_JOB_STATES and after != RETRYING):
            return None
        started = _timestamp(new_status.get("startTime"))
        if started is None:
            return None
        retries = int(old_status.get("failed") or 0)
        return JOB_EXECUTION, [name, ns, uid, str(after), str(retries)], now - started
    return None


def recorded_sample(kind: str, obj: Json) -> Sample | None:
    """The duration of a transition that happened before this process saw the object, from the
    timestamps the transition's status write recorded (second resolution, as metav1.Time):
    RayClusterProvisioned's lastTransitionTime - creationTimestamp; a terminal RayJob's endTime
    (updateRayJobStatus sets it to time.Now() in the write that makes it terminal) - startTime,
    with retry_count the status.failed before that write (checkBackoffLimitAndUpdateStatusIfNeeded
    counted the final failure in it)."""
    name, ns, uid = _meta(obj)
    status = obj.get("status") or {}
    if kind == "RayCluster":
        if not condition_true(obj, "RayClusterProvisioned"):
            return None
        cond = next(c for c in status.get("conditions") or [] if c.get("type") == "RayClusterProvisioned")
        created = _timestamp((obj.get("metadata") or {}).get("creationTimestamp"))
        at = _timestamp(cond.get("lastTransitionTime"))
        if created is None or at is None:
            return None
        return CLUSTER_PROVISIONED, [name, ns, uid], max(at - created, 0.0)
    if kind == "RayJob":
        state = str(status.get("jobDeploymentStatus") or "")
        started, ended = _timestamp(status.get("startTime")), _timestamp(status.get("endTime"))
        if state not in TERMINAL_JOB_STATES or started is None or ended is None:
            return None
        failed = int(status.get("failed") or 0)
        retries = max(failed - 1, 0) if state == "Failed" else failed
        return JOB_EXECUTION, [name, ns, uid, state, str(retries)], max(ended - started, 0.0)
    return None


class KubeRayExporter:
    """One reconciler replica's kuberay_* series for its primary kind.

    objects(): the primary objects in the snapshot cache; owns(namespace, name): whether this
    replica holds the lease of the object's partition right now."""

    def __init__(self, kind: str, *, objects: Callable[[], Iterable[Json]],
                 owns: Callable[[str, str], bool], clock: Callable[[], float] = time.time) -> None:
        self.kind = kind
        self._objects = objects
        self._owns = owns
        self._clock = clock
        # (namespace, name) -> the duration samples of its transitions, one per label set
        self._durations: dict[tuple[str, str], dict[tuple[str, ...], Sample]] = {}
        self._lock = threading.Lock()  # scrapes run on the metrics server's thread

    def on_change(self, old: Json | None, new: Json | None) -> None:
        """Called by the snapshot cache for every applied event of the primary kind (new None:
        DELETED). Runs on every replica; only the owner exports what it records."""
        if new is None:
            if old is not None:
                name, ns, _ = _meta(old)
                with self._lock:
                    self._durations.pop((ns, name), None)  # DeleteRay*Metrics
            return
        sample = transition_sample(self.kind, old, new, self._clock())
        if sample is not None:
            name, ns, _ = _meta(new)
            with self._lock:
                series = self._durations.setdefault((ns, name), {})
                if old is not None or tuple(sample[1]) not in series:  # a seen transition wins
                    series[tuple(sample[1])] = sample

    def samples(self) -> Iterator[Sample]:
        for obj in list(self._objects()):
            name, ns, _ = _meta(obj)
            if self._owns(ns, name):
                yield from object_samples(self.kind, obj)
        with self._lock:
            durations = list(self._durations.items())
        for (ns, name), series in durations:
            if self._owns(ns, name):
                yield from list(series.values())


class KubeRayCollector(Collector):
    """The process's one registered collector; reconciler apps add and remove their exporters
    (several apps may share a process in tests, and a name may be registered only once)."""

    def __init__(self) -> None:
        self._exporters: list[KubeRayExporter] = []
        self._lock = threading.Lock()

    def add(self, exporter: KubeRayExporter) -> None:
        with self._lock:
            self._exporters.append(exporter)

    def remove(self, exporter: KubeRayExporter) -> None:
        with self._lock:
            if exporter in self._exporters:
                self._exporters.remove(exporter)

    def describe(self) -> Iterable[Metric]:
        return []  # unchecked collector: families depend on which reconcilers run here

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            exporters = list(self._exporters)
        families: dict[str, GaugeMetricFamily] = {}
        for exporter in exporters:
            for name in KIND_FAMILIES.get(exporter.kind, []):
                if name not in families:
                    help_text, labels = FAMILIES[name]
                    families[name] = GaugeMetricFamily(name, help_text, labels=labels)
            for family, labels, value in exporter.samples():
                families[family].add_metric(labels, value)
        return list(families.values())


COLLECTOR = KubeRayCollector()
_registered: set[int] = set()


def register(registry: CollectorRegistry = REGISTRY) -> KubeRayCollector:
    """Idempotent: the process's collector is registered once per registry."""
    if id(registry) not in _registered:
        registry.register(COLLECTOR)
        _registered.add(id(registry))
    return COLLECTOR
