"""A real Prometheus (Debian's 2.42) scraping `make run`'s stack as the monitoring overlay's
ServiceMonitors would (each target labelled namespace/pod/job, honor_labels), with the overlay's
PrometheusRule loaded:

- after the demo (the sample RayCluster ready, RayJob Complete, RayService Ready) and the states
  the filtered tables show (a RayService held not ready, another upgrading, a suspended RayJob),
  every panel query of KubeRay v1.7's operator dashboard but the kube-state-metrics one, with its
  template variables resolved as Grafana does, returns series; so does every panel of raybus's
  own dashboard (deploy/kustomize/overlays/monitoring/raybus-dashboard.json);
- the rules pass `promtool check rules` and the overlay's `promtool test rules` cases;
- a stopped command-executor fires RaybusConsumerStuck.

Grafana's variables: `$namespace` (label_values over kube-state-metrics' kube_pod_info) finds no
value without kube-state-metrics and keeps its saved one, "default"; `$ControllerNamespace`
and `$ControllerPod` are single-valued, the first option and each option in turn (a raybus Pod
runs one controller: each controller's panels must have data on its own Pod); `$__rate_interval`
is max($__interval + scrape, 4 x scrape) with the datasource's scrape interval (1 s here) and a
15-minute range over 1,000 points ($__interval 1 s): 4s.
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
import os
import re
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from raybus.adapters.kube import KubeClient, new_api_client, resource_for
from raybus_sim.devstack.demo import follow_sample
from raybus_sim.devstack.stack import LocalStack
from raybus_sim.testing import prometheus as prom

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
KUBERAY_PANELS = json.loads((HERE / "kuberay_operator_panels.json").read_text())
RAYBUS_DASHBOARD = json.loads((prom.MONITORING / "raybus-dashboard.json").read_text())
SCRAPE_S = 1.0
RATE_INTERVAL = "4s"
NS = "default"
HELD = "raybus-metrics=held"  # pods with this label never become ready (the simulator's hold)
RC = resource_for("ray.io/v1", "RayCluster")
RJ = resource_for("ray.io/v1", "RayJob")
RS = resource_for("ray.io/v1", "RayService")
Row = tuple[str, str, int]  # panel, query as sent, series


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    s = LocalStack(home=tmp_path_factory.mktemp("prom-stack"), extra_env={"RAYBUS_BUS_STATE_S": "1"})
    try:
        s.start()
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def prometheus(stack: LocalStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[prom.Prometheus]:
    server = prom.Prometheus(home=tmp_path_factory.mktemp("prometheus"), scrape_s=SCRAPE_S)
    try:
        yield server.start(prom.stack_targets(stack.procs))
    finally:
        server.stop()


@pytest.fixture
async def kube(stack: LocalStack) -> AsyncIterator[KubeClient]:
    client = KubeClient(await new_api_client(str(stack.kubeconfig)))
    try:
        yield client
    finally:
        await client.close()


def _sample(name: str) -> dict[str, Any]:
    """The sample's Ray object (the RayJob's file also holds its code's ConfigMap)."""
    docs = yaml.safe_load_all((REPO / "deploy" / "samples" / name).read_text())
    return next(d for d in docs if d and str(d.get("apiVersion", "")).startswith("ray.io/"))


def _hold(template: dict[str, Any]) -> None:
    key, value = HELD.split("=")
    template.setdefault("metadata", {}).setdefault("labels", {})[key] = value


@pytest.fixture(scope="module")
def after_the_demo(stack: LocalStack, prometheus: prom.Prometheus) -> None:
    """`make run`'s demo, then one object in each state a filtered KubeRay table shows."""
    assert follow_sample(kubeconfig=stack.kubeconfig, timeout_s=240.0)
    asyncio.run(_filtered_states(stack))


async def _filtered_states(stack: LocalStack) -> None:
    async with httpx.AsyncClient(base_url=stack.sim_url) as sim:
        (await sim.post("/sim/readiness-holds", json={"namespace": NS, "labelSelector": HELD})).raise_for_status()
    kube = KubeClient(await new_api_client(str(stack.kubeconfig)))
    try:
        # RayServiceReady (false), RayClusterProvisioned (false): its cluster never gets ready
        held = _sample("ray-service.sample.yaml")
        held["metadata"] = {"name": "rayservice-held", "namespace": NS}
        cluster = held["spec"]["rayClusterConfig"]
        for template in [cluster["headGroupSpec"]["template"],
                         *(g["template"] for g in cluster["workerGroupSpecs"])]:
            _hold(template)
        await kube.create(RS, held, namespace=NS)
        # UpgradeInProgress (true): a new cluster for the ready sample, whose head never gets ready
        svc = await kube.get(RS, namespace=NS, name="rayservice-sample")
        head = copy.deepcopy(svc["spec"]["rayClusterConfig"]["headGroupSpec"])
        _hold(head["template"])
        await kube.merge_patch(RS, namespace=NS, name="rayservice-sample",
                               patch={"spec": {"rayClusterConfig": {"headGroupSpec": head}}})
        # Deployment Status (... Suspended ...): a RayJob created suspended
        job = _sample("ray-job.sample.yaml")
        job["metadata"] = {"name": "rayjob-suspended", "namespace": NS}
        job["spec"].update(suspend=True, shutdownAfterJobFinishes=True)  # KubeRay: suspend needs both
        await kube.create(RJ, job, namespace=NS)
    finally:
        await kube.close()


def resolve(expr: str, values: dict[str, str]) -> str:
    """Grafana's interpolation of the variables a query names ($name and ${name})."""
    out = expr.replace("$__rate_interval", RATE_INTERVAL)
    for name in sorted(values, key=len, reverse=True):
        out = out.replace("${" + name + "}", values[name]).replace("$" + name, values[name])
    assert "$" not in out, f"unresolved variable in {out}"
    return out


def has_data(result: list[dict[str, Any]]) -> bool:
    return any(not math.isnan(float(r["value"][1])) for r in result)


def evaluate(prometheus: prom.Prometheus, title: str, exprs: list[str], values: dict[str, str],
             rows: list[Row]) -> list[str]:
    """Each query of a panel: the rows of the table, and the queries that returned no series."""
    empty = []
    for expr in exprs:
        query = resolve(expr, values)
        result = prometheus.query(query)
        rows.append((title, query, len(result)))
        if not has_data(result):
            empty.append(query)
    return empty


def wait_for(check: Any, *, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        ok, last = check()
        if ok:
            return last
        time.sleep(1.0)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}: {last}")


def print_table(name: str, rows: list[Row]) -> None:
    print(f"\n{name}: panel | query | series")
    for title, query, series in rows:
        print(f"  {title} | {query} | {series}")


def kuberay_rounds(prometheus: prom.Prometheus) -> tuple[bool, tuple[list[Row], list[str]]]:
    """One evaluation of KubeRay's dashboard for every value of $ControllerPod."""
    variables = {v["name"]: v for v in KUBERAY_PANELS["variables"]}
    namespaces = prometheus.label_values("namespace", "kube_pod_info")  # none without kube-state-metrics
    namespace = "|".join(namespaces) if namespaces else "|".join(variables["namespace"]["current"])
    controller_ns = prometheus.label_values("namespace", "controller_runtime_active_workers")
    rows: list[Row] = []
    empty: list[str] = []
    if not controller_ns:
        return False, (rows, ["no controller_runtime_active_workers yet"])
    pods = prometheus.label_values("pod", f'controller_runtime_active_workers{{namespace="{controller_ns[0]}"}}')
    for pod in pods:
        controllers = prometheus.label_values(
            "controller", f'controller_runtime_active_workers{{namespace="{controller_ns[0]}", pod="{pod}"}}')
        values = {"namespace": namespace, "ControllerNamespace": controller_ns[0], "ControllerPod": pod,
                  "Controller": controllers[0] if controllers else "", "datasource": "prometheus"}
        for panel in KUBERAY_PANELS["panels"]:
            exprs = [t["expr"] for t in panel["targets"]]
            if any("kube_pod_" in e for e in exprs):
                continue  # kube-state-metrics: out of scope
            uses_pod = any("$ControllerPod" in e or "$Controller" in e for e in exprs)
            if pod != pods[0] and not uses_pod:
                continue  # the object tables do not depend on the Pod
            empty += [f"{panel['title']} [{pod}]: {q}" for q in
                      evaluate(prometheus, f"{panel['title']} [{pod}]", exprs, values, rows)]
    return not empty and len(pods) == 3, (rows, empty)


def test_every_kuberay_operator_panel_has_data(after_the_demo: None, prometheus: prom.Prometheus) -> None:
    panels = [p["title"] for p in KUBERAY_PANELS["panels"]]
    skipped = [p["title"] for p in KUBERAY_PANELS["panels"]
               if any("kube_pod_" in t["expr"] for t in p["targets"])]
    assert skipped == ["HeadPodReady (false)"] and len(panels) == 14
    rows, _ = wait_for(lambda: kuberay_rounds(prometheus), timeout=120,
                       what="every KubeRay operator panel with data on the Pod of its controller")
    print_table("KubeRay operator dashboard", rows)
    # each controller's panels on its own Pod: one raybus reconciler per controller
    pods = {re.search(r"\[(.*)\]", t).group(1) for t, _, _ in rows if "[" in t}  # type: ignore[union-attr]
    assert pods == {"raybus-cluster-reconciler", "raybus-job-reconciler", "raybus-service-reconciler"}
    durations = {q: n for t, q, n in rows if "duration_seconds" in q}
    assert all(n >= 1 for n in durations.values()) and len(durations) == 2


def raybus_round(prometheus: prom.Prometheus) -> tuple[bool, tuple[list[Row], list[str]]]:
    controller_ns = prometheus.label_values("namespace", "controller_runtime_active_workers")
    if not controller_ns:
        return False, ([], ["no controller_runtime_active_workers yet"])
    values = {"namespace": ".*", "ControllerNamespace": controller_ns[0], "Controller": ".*",
              "datasource": "prometheus"}  # $namespace and $Controller: All (allValue .*)
    rows: list[Row] = []
    empty: list[str] = []
    for panel in RAYBUS_DASHBOARD["panels"]:
        exprs = [t["expr"] for t in panel.get("targets") or []]
        empty += evaluate(prometheus, panel["title"], exprs, values, rows)
    return not empty, (rows, empty)


def test_every_raybus_dashboard_panel_has_data(after_the_demo: None, prometheus: prom.Prometheus) -> None:
    queries = [t for p in RAYBUS_DASHBOARD["panels"] for t in p.get("targets") or []]
    assert len(queries) >= 25
    rows, _ = wait_for(lambda: raybus_round(prometheus), timeout=60, what="every raybus dashboard panel with data")
    print_table("raybus dashboard", rows)


def test_the_rules_pass_promtool(tmp_path: Path) -> None:
    rules = prom.write_rules(tmp_path / "raybus-rules.yaml")
    check = subprocess.run([prom.binary("promtool"), "check", "rules", str(rules)],
                           capture_output=True, text=True, check=False)
    assert check.returncode == 0 and "SUCCESS: 5 rules found" in check.stdout, check.stdout + check.stderr
    (tmp_path / "rules-test.yaml").write_text((prom.MONITORING / "rules-test.yaml").read_text())
    unit = subprocess.run([prom.binary("promtool"), "test", "rules", "rules-test.yaml"], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert unit.returncode == 0 and "SUCCESS" in unit.stdout, unit.stdout + unit.stderr


async def test_a_stopped_consumer_fires_its_alert(stack: LocalStack, prometheus: prom.Prometheus,
                                                  kube: KubeClient) -> None:
    """SIGSTOP the command-executor (the process hangs: it neither acks nor exits), then make
    work for it: RaybusConsumerStuck fires for its consumer of RAYBUS_COMMANDS."""
    executor = stack.proc("command-executor")
    os.kill(executor.popen.pid, signal.SIGSTOP)
    try:
        body = _sample("ray-cluster.sample.yaml")
        body["metadata"] = {"name": "stuck-probe", "namespace": NS}
        await kube.create(RC, body, namespace=NS)

        def firing() -> tuple[bool, list[dict[str, Any]]]:
            alerts = [a for a in prometheus.alerts() if a["labels"].get("alertname") == "RaybusConsumerStuck"]
            return any(a["state"] == "firing" and a["labels"].get("consumer") == "command-executor"
                       and a["labels"].get("stream") == "RAYBUS_COMMANDS" for a in alerts), alerts

        alerts = await asyncio.to_thread(wait_for, firing, timeout=180, what="RaybusConsumerStuck firing")
        print(f"\nfiring: {[a['labels'] for a in alerts if a['state'] == 'firing']}")
    finally:
        os.kill(executor.popen.pid, signal.SIGCONT)
