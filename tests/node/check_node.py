"""The node itself: Ready, Pods Running, a ClusterIP Service answering, cluster DNS, the API server
reachable from a Pod (the `kubernetes` Service), `kubectl logs` (API server -> kubelet), a claim
bound to a volume."""

from __future__ import annotations

import json
import urllib.request

from tests.node.install import wait_until
from tests.node.node import KUBERNETES_SERVICE_IP, NODE_IP, NODE_NAME, Node

RAY_IMAGE = "localhost/ray:node"

ECHO = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: echo, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: echo}}
  template:
    metadata: {labels: {app: echo}}
    spec:
      containers:
        - name: echo
          image: localhost/ray:node
          command: [python3, -m, http.server, "8080"]
          ports: [{containerPort: 8080}]
          readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 2}
          resources: {requests: {cpu: 10m, memory: 32Mi}}
---
apiVersion: v1
kind: Service
metadata: {name: echo, namespace: default}
spec:
  selector: {app: echo}
  ports: [{port: 80, targetPort: 8080}]
"""

# Run inside a Pod: DNS names of the cluster, the API server through the `kubernetes` Service with
# the Pod's own ServiceAccount token, and a Service by its DNS name.
PROBE = r"""
import json, socket, ssl, urllib.request
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
out = {}
for name in ("kubernetes.default.svc.cluster.local", "kube-dns.kube-system", "echo"):
    out[name] = socket.gethostbyname(name)
ctx = ssl.create_default_context(cafile=f"{sa}/ca.crt")
req = urllib.request.Request("https://kubernetes.default.svc/version",
                             headers={"Authorization": "Bearer " + open(f"{sa}/token").read()})
out["apiserver"] = json.load(urllib.request.urlopen(req, context=ctx, timeout=10))["gitVersion"]
out["echo_status"] = urllib.request.urlopen("http://echo.default.svc.cluster.local/", timeout=10).status
print("PROBE " + json.dumps(out))
"""


def test_node_ready(node: Node) -> None:
    got = node.get("node", NODE_NAME)
    conds = {c["type"]: c["status"] for c in got["status"]["conditions"]}
    assert conds["Ready"] == "True"
    assert got["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    assert {"type": "InternalIP", "address": NODE_IP} in got["status"]["addresses"]


def test_kubernetes_service_endpoint_is_the_node_address(node: Node) -> None:
    slices = node.get("endpointslices", "-n", "default", "-l", "kubernetes.io/service-name=kubernetes")
    addresses = [a for s in slices["items"] for e in s.get("endpoints", []) for a in e["addresses"]]
    assert addresses == [NODE_IP]
    assert node.get("service", "kubernetes", "-n", "default")["spec"]["clusterIP"] == KUBERNETES_SERVICE_IP


def test_pods_running_and_cluster_ip_answers(node: Node) -> None:
    node.kubectl("apply", "-f", "-", input_=ECHO)
    node.kubectl("rollout", "status", "deployment/echo", "--timeout=180s", timeout=200)
    pods = node.get("pods", "-l", "app=echo")["items"]
    assert [p["status"]["phase"] for p in pods] == ["Running", "Running"]
    assert all(p["status"]["podIP"].startswith("198.18.0.") for p in pods)
    ip = node.get("service", "echo")["spec"]["clusterIP"]

    def answers() -> int:
        with urllib.request.urlopen(f"http://{ip}/", timeout=5) as resp:
            return int(resp.status)
    assert wait_until(answers, f"Service echo at {ip}", 60) == 200


def test_dns_and_api_server_from_a_pod_and_logs(node: Node) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": "default"},
           "spec": {"restartPolicy": "Never", "containers": [{
               "name": "probe", "image": RAY_IMAGE, "command": ["python3", "-c", PROBE],
               "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}}]}}
    node.kubectl("apply", "-f", "-", input_=json.dumps(pod))
    phase = wait_until(lambda: node.get("pod", "probe")["status"].get("phase") in ("Succeeded", "Failed")
                       and node.get("pod", "probe")["status"]["phase"], "probe Pod finished", 120)
    logs = node.kubectl("logs", "probe").stdout  # the API server asks the kubelet
    assert phase == "Succeeded", logs
    line = next(ln for ln in logs.splitlines() if ln.startswith("PROBE "))
    got = json.loads(line.removeprefix("PROBE "))
    assert got["kubernetes.default.svc.cluster.local"] == KUBERNETES_SERVICE_IP
    assert got["kube-dns.kube-system"] == "198.19.0.10"
    assert got["echo"] == node.get("service", "echo")["spec"]["clusterIP"]
    assert got["apiserver"].startswith("v1.36.2")
    assert got["echo_status"] == 200


def test_claim_binds_to_a_node_volume(node: Node) -> None:
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "probe", "namespace": "default"},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    node.kubectl("apply", "-f", "-", input_=json.dumps(claim))
    wait_until(lambda: node.get("pvc", "probe")["status"].get("phase") == "Bound", "claim probe Bound", 60)
    node.kubectl("delete", "pvc/probe", "deployment/echo", "service/echo", "pod/probe", "--wait=false")
