"""KubeRay v1.7's kuberay_* series (observability/kuberay.py): KubeRay's names, labels and values
per object, only for the partitions a replica owns, durations set once on the transition KubeRay
emits on, and forgotten when the object is deleted."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from raybus.bus import subjects as s
from raybus.bus.envelopes import ObjectEvent, ObjectKey
from raybus.observability import kuberay
from raybus.observability.kuberay import KubeRayCollector, KubeRayExporter
from raybus.runtime.cache import ObjectCache

Json = dict[str, Any]
NOW = 1_000_000.0


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cluster(name: str, *, provisioned: bool | None = None, owner: str | None = None) -> Json:
    meta: Json = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "creationTimestamp": _iso(NOW - 42)}
    if owner:
        meta["labels"] = {"ray.io/originated-from-crd": owner}
    status: Json = {}
    if provisioned is not None:
        status["conditions"] = [{"type": "RayClusterProvisioned",
                                 "status": "True" if provisioned else "False"}]
    return {"metadata": meta, "status": status}


def job(name: str, status: str, *, failed: int | None = None) -> Json:
    st: Json = {"jobDeploymentStatus": status, "startTime": _iso(NOW - 7)}
    if failed is not None:
        st["failed"] = failed
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"}, "status": st}


def service(name: str, *, ready: bool, upgrading: bool | None = None) -> Json:
    conds = [{"type": "Ready", "status": "True" if ready else "False"}]
    if upgrading is not None:
        conds.append({"type": "UpgradeInProgress", "status": "True" if upgrading else "False"})
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "status": {"conditions": conds}}


def scrape(*exporters: KubeRayExporter) -> dict[str, set[tuple[frozenset[tuple[str, str]], float]]]:
    registry = CollectorRegistry()
    collector = KubeRayCollector()
    for e in exporters:
        collector.add(e)
    registry.register(collector)
    out: dict[str, set[tuple[frozenset[tuple[str, str]], float]]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            out.setdefault(sample.name, set()).add((frozenset(sample.labels.items()), sample.value))
    return out


def labels(**kw: str) -> frozenset[tuple[str, str]]:
    return frozenset(kw.items())


def test_cluster_series_match_kuberay() -> None:
    objects = [cluster("a", provisioned=True, owner="RayJob"), cluster("b")]
    got = scrape(KubeRayExporter("RayCluster", objects=lambda: objects, owns=lambda ns, n: True))
    assert got["kuberay_cluster_info"] == {
        (labels(name="a", namespace="ns", uid="uid-a", owner_kind="RayJob"), 1.0),
        (labels(name="b", namespace="ns", uid="uid-b", owner_kind="None"), 1.0)}
    assert got["kuberay_cluster_condition_provisioned"] == {
        (labels(name="a", namespace="ns", uid="uid-a", condition="true"), 1.0),
        (labels(name="b", namespace="ns", uid="uid-b", condition="false"), 1.0)}


def test_job_and_service_series_match_kuberay() -> None:
    jobs = [job("j", "Running")]
    services = [service("s", ready=True, upgrading=True), service("t", ready=False)]
    got = scrape(KubeRayExporter("RayJob", objects=lambda: jobs, owns=lambda ns, n: True),
                 KubeRayExporter("RayService", objects=lambda: services, owns=lambda ns, n: True))
    assert got["kuberay_job_info"] == {(labels(name="j", namespace="ns", uid="uid-j"), 1.0)}
    assert got["kuberay_job_deployment_status"] == {
        (labels(name="j", namespace="ns", uid="uid-j", deployment_status="Running"), 1.0)}
    assert got["kuberay_service_info"] == {(labels(name="s", namespace="ns", uid="uid-s"), 1.0),
                                           (labels(name="t", namespace="ns", uid="uid-t"), 1.0)}
    assert got["kuberay_service_condition_ready"] == {
        (labels(name="s", namespace="ns", uid="uid-s", condition="true"), 1.0),
        (labels(name="t", namespace="ns", uid="uid-t", condition="false"), 1.0)}
    assert got["kuberay_service_condition_upgrade_in_progress"] == {
        (labels(name="s", namespace="ns", uid="uid-s", condition="true"), 1.0),
        (labels(name="t", namespace="ns", uid="uid-t", condition="false"), 1.0)}


def test_two_replicas_export_each_object_once() -> None:
    """Each replica yields only the objects of partitions it owns: the union has every object
    exactly once (no double counting), whatever the split."""
    objects = [cluster(f"c{i}") for i in range(20)]
    owner = {f"c{i}": i % 2 for i in range(20)}
    replicas = [KubeRayExporter("RayCluster", objects=lambda: objects,
                                owns=lambda ns, n, r=r: owner[n] == r) for r in (0, 1)]
    got = scrape(*replicas)
    names = sorted(dict(lbls)["name"] for lbls, _ in got["kuberay_cluster_info"])
    assert names == sorted(f"c{i}" for i in range(20))
    assert len(got["kuberay_cluster_info"]) == 20
    only_first = scrape(replicas[0])
    assert {dict(lbls)["name"] for lbls, _ in only_first["kuberay_cluster_info"]} == {
        f"c{i}" for i in range(0, 20, 2)}


def test_provisioned_duration_set_on_the_transition_only_and_deleted_with_the_object() -> None:
    owned = {"a": True}
    exporter = KubeRayExporter("RayCluster", objects=list, owns=lambda ns, n: owned[n],
                               clock=lambda: NOW)
    exporter.on_change(None, cluster("a", provisioned=True))  # first sight (snapshot): no emit
    assert kuberay.CLUSTER_PROVISIONED not in scrape(exporter)
    exporter.on_change(cluster("a"), cluster("a", provisioned=False))
    assert kuberay.CLUSTER_PROVISIONED not in scrape(exporter)
    exporter.on_change(cluster("a", provisioned=False), cluster("a", provisioned=True))
    series = {(labels(name="a", namespace="ns", uid="uid-a"), 42.0)}
    assert scrape(exporter)[kuberay.CLUSTER_PROVISIONED] == series
    # true -> true (any later status write) does not set it again
    exporter.on_change(cluster("a", provisioned=True), cluster("a", provisioned=True))
    assert scrape(exporter)[kuberay.CLUSTER_PROVISIONED] == series
    owned["a"] = False  # another replica took the partition: it exports the series, not us
    assert kuberay.CLUSTER_PROVISIONED not in scrape(exporter)
    owned["a"] = True
    exporter.on_change(cluster("a", provisioned=True), None)  # DeleteRayClusterMetrics
    assert kuberay.CLUSTER_PROVISIONED not in scrape(exporter)


def test_job_execution_duration_on_terminal_or_retrying_with_kuberays_retry_count() -> None:
    exporter = KubeRayExporter("RayJob", objects=list, owns=lambda ns, n: True,
                               clock=lambda: NOW)
    exporter.on_change(job("j", "Initializing"), job("j", "Running"))
    assert kuberay.JOB_EXECUTION not in scrape(exporter)
    exporter.on_change(job("j", "Running", failed=1), job("j", "Retrying", failed=2))
    assert scrape(exporter)[kuberay.JOB_EXECUTION] == {(labels(
        name="j", namespace="ns", uid="uid-j", job_deployment_status="Retrying", retry_count="1"), 7.0)}
    exporter.on_change(job("j", "Running", failed=2), job("j", "Complete", failed=2))
    # A GaugeVec keeps each label set: the Retrying series stays beside the final one.
    assert scrape(exporter)[kuberay.JOB_EXECUTION] == {
        (labels(name="j", namespace="ns", uid="uid-j", job_deployment_status="Retrying",
                retry_count="1"), 7.0),
        (labels(name="j", namespace="ns", uid="uid-j", job_deployment_status="Complete",
                retry_count="2"), 7.0)}
    # terminal -> terminal (e.g. the TTL's later writes) is not a transition
    exporter.on_change(job("j", "Complete"), job("j", "Failed"))
    assert {dict(lbls)["job_deployment_status"]
            for lbls, _ in scrape(exporter)[kuberay.JOB_EXECUTION]} == {"Retrying", "Complete"}
    exporter.on_change(job("j", "Complete"), None)
    assert kuberay.JOB_EXECUTION not in scrape(exporter)


def test_a_process_started_after_the_transition_exports_the_recorded_duration() -> None:
    """A restart or a later replica sees the object already past its transition: the value comes
    from the timestamps that transition's status write recorded, to the second."""
    exporter = KubeRayExporter("RayCluster", objects=list, owns=lambda ns, n: True, clock=lambda: NOW)
    rc = cluster("a", provisioned=True)
    exporter.on_change(None, rc)  # no lastTransitionTime: nothing to tell the duration from
    assert kuberay.CLUSTER_PROVISIONED not in scrape(exporter)
    rc["status"]["conditions"][0]["lastTransitionTime"] = _iso(NOW - 30)
    exporter.on_change(None, rc)
    assert scrape(exporter)[kuberay.CLUSTER_PROVISIONED] == {(labels(name="a", namespace="ns", uid="uid-a"), 12.0)}
    exporter.on_change(None, cluster("b", provisioned=False))  # not provisioned yet: nothing
    assert len(scrape(exporter)[kuberay.CLUSTER_PROVISIONED]) == 1

    jobs = KubeRayExporter("RayJob", objects=list, owns=lambda ns, n: True, clock=lambda: NOW)
    running = job("r", "Running")
    running["status"]["endTime"] = _iso(NOW)  # not terminal: no series, whatever endTime says
    jobs.on_change(None, running)
    complete, failed = job("c", "Complete", failed=1), job("f", "Failed", failed=3)
    for j in (complete, failed):
        j["status"]["endTime"] = _iso(NOW - 2)
        jobs.on_change(None, j)
    # retry_count: status.failed before the terminal write (a final failure counted itself)
    assert scrape(jobs)[kuberay.JOB_EXECUTION] == {
        (labels(name="c", namespace="ns", uid="uid-c", job_deployment_status="Complete", retry_count="1"), 5.0),
        (labels(name="f", namespace="ns", uid="uid-f", job_deployment_status="Failed", retry_count="2"), 5.0)}


def test_a_seen_transition_keeps_its_own_value_over_a_recorded_one() -> None:
    exporter = KubeRayExporter("RayCluster", objects=list, owns=lambda ns, n: True, clock=lambda: NOW)
    exporter.on_change(cluster("a", provisioned=False), cluster("a", provisioned=True))
    rc = cluster("a", provisioned=True)
    rc["status"]["conditions"][0]["lastTransitionTime"] = _iso(NOW - 30)
    exporter.on_change(None, rc)  # e.g. the cache re-subscribed after a NATS restart
    assert scrape(exporter)[kuberay.CLUSTER_PROVISIONED] == {(labels(name="a", namespace="ns", uid="uid-a"), 42.0)}


def test_a_scrape_is_the_current_state() -> None:
    """Computed at scrape time from the cache, like KubeRay's Collect over its informer cache."""
    objects = [job("j", "Running")]
    exporter = KubeRayExporter("RayJob", objects=lambda: objects, owns=lambda ns, n: True)
    assert {dict(lbls)["deployment_status"]
            for lbls, _ in scrape(exporter)["kuberay_job_deployment_status"]} == {"Running"}
    objects[0] = job("j", "Complete")
    assert {dict(lbls)["deployment_status"]
            for lbls, _ in scrape(exporter)["kuberay_job_deployment_status"]} == {"Complete"}
    objects.clear()
    assert "kuberay_job_deployment_status" not in scrape(exporter)


def test_the_snapshot_cache_feeds_the_exporter_its_transitions() -> None:
    """The wiring ReconcilerApp sets up: the cache's listener sees each applied event with the
    state it replaces; a DELETED event forgets the object's series."""
    cache = ObjectCache(None, kinds=[s.Kind.RAYCLUSTER])  # type: ignore[arg-type]  # never started
    exporter = KubeRayExporter("RayCluster", objects=lambda: cache.objects(s.Kind.RAYCLUSTER),
                               owns=lambda ns, n: True, clock=lambda: NOW)
    cache.listeners.setdefault(s.Kind.RAYCLUSTER.value, []).append(exporter.on_change)

    def event(etype: str, obj: Json) -> ObjectEvent:
        return ObjectEvent(key=ObjectKey(namespace="ns", name="a"), kind="raycluster",
                           type=etype, object=obj)  # type: ignore[arg-type]

    cache.apply(event("ADDED", cluster("a")))
    got = scrape(exporter)
    assert got["kuberay_cluster_condition_provisioned"] == {
        (labels(name="a", namespace="ns", uid="uid-a", condition="false"), 1.0)}
    assert kuberay.CLUSTER_PROVISIONED not in got
    cache.apply(event("MODIFIED", cluster("a", provisioned=True)))
    got = scrape(exporter)
    assert got[kuberay.CLUSTER_PROVISIONED] == {(labels(name="a", namespace="ns", uid="uid-a"), 42.0)}
    assert got["kuberay_cluster_condition_provisioned"] == {
        (labels(name="a", namespace="ns", uid="uid-a", condition="true"), 1.0)}
    cache.apply(event("DELETED", cluster("a", provisioned=True)))
    assert scrape(exporter) == {}
