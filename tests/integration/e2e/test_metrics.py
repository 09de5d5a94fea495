"""Issue 19, metrics: on the local stack (two replicas of every reconciler) with the three samples
applied and followed as `make run` does, scraping every service's /metrics shows KubeRay v1.7's
kuberay_* series with KubeRay's labels and values that match the objects, each series exported
by exactly one process, and client-go's rest_client_* metrics for the watcher's and the
executor's API traffic."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from raybus.adapters.kube import resource_for
from raybus_sim.devstack.demo import follow_sample
from raybus_sim.devstack.stack import LocalStack
from tests.integration.e2e.conftest import RC, Kube

RJ = resource_for("ray.io/v1", "RayJob")
RS = resource_for("ray.io/v1", "RayService")
Series = tuple[str, frozenset[tuple[str, str]]]  # sample name, labels


async def scrape(stack: LocalStack) -> dict[str, list[tuple[Series, float]]]:
    """Every service process's samples, by process name."""
    out: dict[str, list[tuple[Series, float]]] = {}
    async with httpx.AsyncClient(timeout=10) as http:
        for proc in stack.procs:
            if not proc.metrics_port:
                continue
            text = (await http.get(f"http://127.0.0.1:{proc.metrics_port}/metrics")).text
            out[proc.name] = [((s.name, frozenset(s.labels.items())), s.value)
                              for family in text_string_to_metric_families(text) for s in family.samples]
    return out


def status_of(obj: dict[str, Any], cond_type: str) -> str:
    conds = (obj.get("status") or {}).get("conditions") or []
    return str(any(c.get("type") == cond_type and c.get("status") == "True" for c in conds)).lower()


def expected_series(clusters: list[dict[str, Any]], job: dict[str, Any],
                    service: dict[str, Any]) -> dict[Series, float]:
    """What KubeRay's collectors would yield for these objects (value 1 for every gauge)."""
    def ids(obj: dict[str, Any]) -> dict[str, str]:
        m = obj["metadata"]
        return {"name": m["name"], "namespace": m["namespace"], "uid": m["uid"]}

    want: dict[Series, float] = {}

    def add(family: str, **labels: str) -> None:
        want[(family, frozenset(labels.items()))] = 1.0

    for rc in clusters:
        owner = ((rc["metadata"].get("labels") or {}).get("ray.io/originated-from-crd")) or "None"
        add("kuberay_cluster_info", **ids(rc), owner_kind=owner)
        add("kuberay_cluster_condition_provisioned", **ids(rc), condition=status_of(rc, "RayClusterProvisioned"))
    add("kuberay_job_info", **ids(job))
    add("kuberay_job_deployment_status", **ids(job), deployment_status=job["status"]["jobDeploymentStatus"])
    add("kuberay_service_info", **ids(service))
    add("kuberay_service_condition_ready", **ids(service), condition=status_of(service, "Ready"))
    add("kuberay_service_condition_upgrade_in_progress", **ids(service),
        condition=status_of(service, "UpgradeInProgress"))
    return want


async def test_kuberay_series_match_the_samples_and_are_exported_once(stack: LocalStack, kube: Kube) -> None:
    applied_at = time.time()
    assert await asyncio.to_thread(follow_sample, kubeconfig=stack.kubeconfig, timeout_s=180.0)
    job = await kube.c.get(RJ, namespace="default", name="rayjob-sample")
    service = await kube.c.get(RS, namespace="default", name="rayservice-sample")
    assert job["status"]["jobDeploymentStatus"] == "Complete"
    job_cluster = job["status"]["rayClusterName"]
    service_cluster = service["status"]["activeServiceStatus"]["rayClusterName"]
    sample = await kube.c.get(RC, namespace="default", name="raycluster-kuberay")
    names = {"raycluster-kuberay", job_cluster, service_cluster}
    owner_kinds = {"raycluster-kuberay": "None", job_cluster: "RayJob", service_cluster: "RayService"}

    scraped: dict[str, list[tuple[Series, float]]] = {}
    want: dict[Series, float] = {}

    async def matches() -> bool:
        nonlocal scraped, want
        clusters = [await kube.c.get(RC, namespace="default", name=n) for n in sorted(names)]
        want = expected_series(clusters, await kube.c.get(RJ, namespace="default", name="rayjob-sample"),
                               await kube.c.get(RS, namespace="default", name="rayservice-sample"))
        scraped = await scrape(stack)
        got = [series for samples in scraped.values() for series, _ in samples]
        return all(got.count(series) == 1 for series in want)

    await kube.eventually(matches, timeout=30, what="every kuberay_* series exported once")
    # KubeRay's labels: the owner kinds and conditions are what the objects say.
    for name, labels in want:
        lbl = dict(labels)
        if name == "kuberay_cluster_info":
            assert lbl["owner_kind"] == owner_kinds[lbl["name"]]
        if name in ("kuberay_cluster_condition_provisioned", "kuberay_service_condition_ready"):
            assert lbl["condition"] == "true"
        if name == "kuberay_service_condition_upgrade_in_progress":
            assert lbl["condition"] == "false"

    by_name: dict[str, list[tuple[str, dict[str, str], float]]] = {}
    for proc, samples in scraped.items():
        for (name, labels), value in samples:
            if name.startswith("kuberay_"):
                by_name.setdefault(name, []).append((proc, dict(labels), value))
    # Nothing is counted twice: no object appears in one kuberay_* family from two processes.
    for name, rows in by_name.items():
        keys = [(r[1]["namespace"], r[1]["name"]) for r in rows]
        assert len(keys) == len(set(keys)), f"{name} exported twice: {rows}"
    # Who exports what: the reconciler of the kind, never another service.
    for name, rows in by_name.items():
        owner = {"cluster": "cluster-reconciler", "job": "job-reconciler", "service": "service-reconciler"}
        prefix = owner[name.split("_")[1]]
        assert all(proc.startswith(prefix) for proc, _, _ in rows), (name, rows)

    # The durations: set once on the transition, by one replica, with KubeRay's labels.
    elapsed = time.time() - applied_at + 1
    provisioned = {r[1]["name"]: r for r in by_name["kuberay_cluster_provisioned_duration_seconds"]}
    assert names <= set(provisioned)
    sample_row = provisioned["raycluster-kuberay"]
    assert sample_row[1] == {"name": "raycluster-kuberay", "namespace": "default",
                             "uid": sample["metadata"]["uid"]}
    assert 0 < sample_row[2] < elapsed
    executions = [r for r in by_name["kuberay_job_execution_duration_seconds"]
                  if r[1]["name"] == "rayjob-sample"]
    assert [r[1] for r in executions] == [{
        "name": "rayjob-sample", "namespace": "default", "uid": job["metadata"]["uid"],
        "job_deployment_status": "Complete", "retry_count": "0"}]
    assert 0 < executions[0][2] < elapsed

    # client-go's request metrics, for the watcher's and the executor's API traffic.
    host = f"127.0.0.1:{stack.api_port}"
    for proc, method, code in (("watcher", "GET", "200"), ("command-executor", "POST", "201"),
                               ("command-executor", "PUT", "200")):
        counts = [v for (n, labels), v in scraped[proc] if n == "rest_client_requests_total"
                  and dict(labels) == {"code": code, "method": method, "host": host}]
        assert counts and counts[0] > 0, (proc, method, code)
    latency = [v for (n, labels), v in scraped["command-executor"]
               if n == "rest_client_request_duration_seconds_count"
               and dict(labels) == {"verb": "POST", "host": host}]
    assert latency and latency[0] > 0

    # Deleted objects take their series with them (KubeRay's DeleteRay*Metrics for the
    # durations; the scrape-time series follow the cache), the owned clusters too once collected.
    await kube.c.delete(RJ, namespace="default", name="rayjob-sample")
    await kube.c.delete(RS, namespace="default", name="rayservice-sample")
    await kube.c.delete(RC, namespace="default", name="raycluster-kuberay")
    gone = names | {"rayjob-sample", "rayservice-sample"}

    async def forgotten() -> bool:
        left = [(series, proc) for proc, samples in (await scrape(stack)).items()
                for series, _ in samples if series[0].startswith("kuberay_")
                and dict(series[1]).get("name") in gone]
        return not left

    await kube.eventually(forgotten, timeout=60, what="the samples' kuberay_* series gone")
