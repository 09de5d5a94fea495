"""Real kubectl (v1.32) against the standalone server process (`python -m raybus_sim.apiserver`)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from .conftest import crd_dir

pytestmark = pytest.mark.integration
SAMPLE = Path("/work/shared/kuberay-samples/ray-cluster.sample.yaml")
REPO = Path(__file__).resolve().parents[3]


@dataclass
class Proc:
    proc: subprocess.Popen[str]
    url: str
    kubeconfig: Path
    cache: Path

    def kubectl(self, *args: str, check: bool = True, stdin: str | None = None) -> str:
        res = subprocess.run(["kubectl", "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache), *args],
                             capture_output=True, text=True, timeout=20, input=stdin, check=False)
        if check and res.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {res.stderr}")
        return res.stdout + (res.stderr if not check else "")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)


def start(tmp: Path, *extra: str) -> Proc:
    kc = tmp / "kubeconfig"
    proc = subprocess.Popen([sys.executable, "-m", "raybus_sim.apiserver", "--port", "0", "--kubeconfig", str(kc),
                             "--crd-dir", str(crd_dir()), *extra], stdout=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "listening on" in line, line
    return Proc(proc, line.split()[-1], kc, tmp / "cache")


@pytest.fixture
def srv(tmp_path: Path) -> Iterator[Proc]:
    p = start(tmp_path)
    yield p
    p.stop()


def test_apply_get_patch_watch_delete_sample(srv: Proc, tmp_path: Path) -> None:
    assert "raycluster.ray.io/raycluster-kuberay created" in srv.kubectl("apply", "-f", str(SAMPLE))
    obj = yaml.safe_load(srv.kubectl("get", "raycluster", "raycluster-kuberay", "-o", "yaml"))
    # Re-applying is a no-op write. kubectl may still say "configured": schema defaults inside list items make
    # its JSON merge patch resend the list (same against a real apiserver), but nothing changes server-side.
    again = srv.kubectl("apply", "-f", str(SAMPLE))
    assert "unchanged" in again or "configured" in again
    same = yaml.safe_load(srv.kubectl("get", "raycluster", "raycluster-kuberay", "-o", "yaml"))
    assert same["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
    assert obj["metadata"]["generation"] == 1 and obj["spec"]["rayVersion"]
    assert "kubectl.kubernetes.io/last-applied-configuration" in obj["metadata"]["annotations"]

    watcher = subprocess.Popen(["kubectl", "--kubeconfig", str(srv.kubeconfig), "--cache-dir", str(srv.cache),
                                "get", "rayclusters", "-w", "--output-watch-events"],
                               stdout=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in watcher.stdout or []], daemon=True)
    reader.start()
    _read_until(lines, "ADDED")  # the watch is established (its initial list arrived)
    doc = yaml.safe_load(SAMPLE.read_text())
    doc["spec"]["workerGroupSpecs"][0]["replicas"] = 2
    assert "configured" in srv.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(doc))
    obj = yaml.safe_load(srv.kubectl("get", "raycluster", "raycluster-kuberay", "-o", "yaml"))
    assert obj["metadata"]["generation"] == 2 and obj["spec"]["workerGroupSpecs"][0]["replicas"] == 2

    srv.kubectl("patch", "raycluster", "raycluster-kuberay", "--subresource=status", "--type=merge",
                "-p", '{"status":{"state":"ready","desiredWorkerReplicas":2}}')
    obj = json.loads(srv.kubectl("get", "raycluster", "raycluster-kuberay", "-o", "json"))
    assert obj["status"]["state"] == "ready" and obj["metadata"]["generation"] == 2
    table = srv.kubectl("get", "rayclusters")
    header, row = table.splitlines()[:2]
    assert header.split()[0] == "NAME" and row.split()[0] == "raycluster-kuberay"
    # additionalPrinterColumns (fixture and generated CRD both start with desired workers, have status)
    assert "DESIRED WORKERS" in header and row.split()[1] == "2" and "ready" in row.split()

    assert "server dry run" in srv.kubectl("delete", "-f", str(SAMPLE), "--dry-run=server")
    doc["spec"]["workerGroupSpecs"][0]["replicas"] = 3
    srv.kubectl("apply", "-f", "-", "--dry-run=server", stdin=yaml.safe_dump(doc))
    obj = json.loads(srv.kubectl("get", "raycluster", "raycluster-kuberay", "-o", "json"))
    assert obj["spec"]["workerGroupSpecs"][0]["replicas"] == 2 and obj["metadata"]["generation"] == 2
    assert "deleted" in srv.kubectl("delete", "-f", str(SAMPLE))
    assert "NotFound" in srv.kubectl("get", "raycluster", "raycluster-kuberay", check=False)
    seen = _read_until(lines, "DELETED")
    watcher.terminate()
    watcher.wait(timeout=5)
    events = ["ADDED", *(line.split()[0] for line in seen if line.strip())]
    assert events[0] == "ADDED" and "MODIFIED" in events and events[-1] == "DELETED"


def _read_until(lines: queue.Queue[str], first_word: str, timeout: float = 20.0) -> list[str]:
    """Lines of `kubectl get -w` up to and including the first starting with first_word."""
    deadline = time.monotonic() + timeout
    out: list[str] = []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        out.append(line)
        if line.split() and line.split()[0] == first_word:
            return out
    raise AssertionError(f"no {first_word} event from kubectl get -w: {out}")


def test_builtin_apply_wait_ready_and_delete(srv: Proc) -> None:
    manifest = """
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  containers:
  - {name: nginx, image: "nginx:1.27", ports: [{containerPort: 80}]}
  - {name: side, image: busybox}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80}]
"""
    srv.kubectl("apply", "-f", "-", stdin=manifest)
    assert "condition met" in srv.kubectl("wait", "--for=condition=Ready", "pod/web", "--timeout=10s")
    # strategic merge from client-side apply: only the image of one container changes
    srv.kubectl("apply", "-f", "-", stdin=manifest.replace("nginx:1.27", "nginx:1.28"))
    pod = json.loads(srv.kubectl("get", "pod", "web", "-o", "json"))
    assert [c["image"] for c in pod["spec"]["containers"]] == ["nginx:1.28", "busybox"]
    row = srv.kubectl("get", "pods", "web", "--no-headers").split()
    assert row[:3] == ["web", "2/2", "Running"]
    slices = json.loads(srv.kubectl("get", "endpointslices", "-l", "kubernetes.io/service-name=web", "-o", "json"))
    assert slices["items"][0]["endpoints"][0]["addresses"] == [pod["status"]["podIP"]]
    srv.kubectl("delete", "-f", "-", stdin=manifest)
    assert "NotFound" in srv.kubectl("get", "pod", "web", check=False)
    assert "NotFound" in srv.kubectl("get", "svc", "web", check=False)
    deadline = time.monotonic() + 20  # the Service's EndpointSlice goes with it (garbage collector)
    while "No resources found" not in srv.kubectl(
            "get", "endpointslices", "-l", "kubernetes.io/service-name=web", check=False):
        assert time.monotonic() < deadline, "EndpointSlice of the deleted Service still there"
        time.sleep(0.1)


POD_AND_SVC = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {{app: {name}}}}}
spec: {{containers: [{{name: c, image: busybox}}]}}
---
apiVersion: v1
kind: Service
metadata: {{name: {name}}}
spec: {{selector: {{app: {name}}}, ports: [{{port: 80}}]}}
"""


def _http(url: str) -> list[dict]:
    with urllib.request.urlopen(url, timeout=5) as r:
        return [json.loads(line) for line in r.read().splitlines() if line.strip()]


def test_state_file_restart_resumes(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    first = start(tmp_path / "a", "--state-file", str(state))
    try:
        # (kubectl create configmap would send protobuf, which the sim does not decode: use -f)
        first.kubectl("create", "-f", "-", stdin='{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"keep"}}')
        first.kubectl("apply", "-f", "-", stdin=POD_AND_SVC.format(name="one"))
        first.kubectl("wait", "--for=condition=Ready", "pod/one", "--timeout=10s")
        pod_before = json.loads(first.kubectl("get", "pod", "one", "-o", "json"))
        svc_before = json.loads(first.kubectl("get", "svc", "one", "-o", "json"))
        before = json.loads(first.kubectl("get", "configmap", "keep", "-o", "json"))
        old_rv = int(before["metadata"]["resourceVersion"]) - 1
    finally:
        first.stop()
    assert state.exists()
    second = start(tmp_path / "b", "--state-file", str(state))
    try:
        after = json.loads(second.kubectl("get", "configmap", "keep", "-o", "json"))
        assert after["metadata"]["uid"] == before["metadata"]["uid"]
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        base = f"{second.url}/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1"
        expired = _http(f"{base}&resourceVersion={old_rv}")
        assert expired[0]["type"] == "ERROR" and expired[0]["object"]["code"] == 410
        with urllib.request.urlopen(f"{second.url}/api/v1/namespaces/default/configmaps", timeout=5) as r:
            current = json.loads(r.read())["metadata"]["resourceVersion"]  # the restored rv
        assert _http(f"{base}&resourceVersion={current}") == []  # resumes fine from the latest rv
        second.kubectl("create", "-f", "-", stdin='{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"next"}}')
        nxt = json.loads(second.kubectl("get", "configmap", "next", "-o", "json"))
        assert int(nxt["metadata"]["resourceVersion"]) > int(current)  # counter continued, not reset
        # the kubelet resumes: the running pod is untouched, new pods run and get fresh IPs
        pod_after = json.loads(second.kubectl("get", "pod", "one", "-o", "json"))
        assert pod_after["metadata"]["resourceVersion"] == pod_before["metadata"]["resourceVersion"]
        second.kubectl("apply", "-f", "-", stdin=POD_AND_SVC.format(name="two"))
        second.kubectl("wait", "--for=condition=Ready", "pod/two", "--timeout=10s")
        two = json.loads(second.kubectl("get", "pod", "two", "-o", "json"))
        assert two["status"]["podIP"] != pod_before["status"]["podIP"]
        svc_two = json.loads(second.kubectl("get", "svc", "two", "-o", "json"))
        assert svc_two["spec"]["clusterIP"] != svc_before["spec"]["clusterIP"]
    finally:
        second.stop()


def test_a_pod_restored_running_but_not_ready_still_turns_ready(tmp_path: Path) -> None:
    """The simulator restarted between a container's start and its readiness (the chaos soak's
    API server restart left a RayJob's worker unready for good): a kubelet keeps probing."""
    state = tmp_path / "state.json"
    first = start(tmp_path / "a", "--state-file", str(state))
    try:
        hold = urllib.request.Request(f"{first.url}/sim/readiness-holds", method="POST", data=json.dumps(
            {"namespace": "default", "labelSelector": "app=held"}).encode(),
            headers={"Content-Type": "application/json"})
        urllib.request.urlopen(hold, timeout=5).close()
        first.kubectl("apply", "-f", "-", stdin=POD_AND_SVC.format(name="held"))
        first.kubectl("wait", "--for=jsonpath={.status.phase}=Running", "pod/held", "--timeout=10s")
        pod = json.loads(first.kubectl("get", "pod", "held", "-o", "json"))
        assert [c["ready"] for c in pod["status"]["containerStatuses"]] == [False]
    finally:
        first.stop()
    second = start(tmp_path / "b", "--state-file", str(state))  # the hold died with the first
    try:
        second.kubectl("wait", "--for=condition=Ready", "pod/held", "--timeout=10s")
    finally:
        second.stop()


def test_kubectl_errors_and_nodes_look_like_a_cluster(srv: Proc) -> None:
    bad = '{"apiVersion":"ray.io/v1","kind":"RayCluster","metadata":{"name":"bad"},"spec":{"bogus":1}}'
    out = srv.kubectl("apply", "-f", "-", stdin=bad, check=False)
    assert 'strict decoding error: unknown field "spec.bogus"' in out
    unknown = '{"apiVersion":"scheduling.volcano.sh/v1beta1","kind":"Queue","metadata":{"name":"q"}}'
    out = srv.kubectl("apply", "-f", "-", stdin=unknown, check=False)
    assert 'no matches for kind "Queue"' in out
    row = srv.kubectl("get", "nodes", "--no-headers").split()
    assert row[:2] == ["raybus-sim-node", "Ready"]


def test_kubectl_typed_generators_send_protobuf(srv: Proc) -> None:
    srv.kubectl("create", "configmap", "gen", "--from-literal=a=b", "--from-literal=c=d")
    cm = json.loads(srv.kubectl("get", "configmap", "gen", "-o", "json"))
    assert cm["data"] == {"a": "b", "c": "d"} and "generateName" not in cm["metadata"]
    srv.kubectl("create", "secret", "generic", "pw", "--from-literal=pw=hunter2")
    secret = json.loads(srv.kubectl("get", "secret", "pw", "-o", "json"))
    assert secret["data"] == {"pw": "aHVudGVyMg=="} and secret["type"] == "Opaque"
    srv.kubectl("create", "namespace", "team-a")
    srv.kubectl("create", "role", "r", "--verb=get,list", "--resource=pods", "-n", "team-a")
    role = json.loads(srv.kubectl("get", "role", "r", "-n", "team-a", "-o", "json"))
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    # kinds without a protobuf decoder are refused with 415, never mis-decoded
    assert "unknown format" in srv.kubectl("create", "job", "j", "--image=busybox", check=False)
