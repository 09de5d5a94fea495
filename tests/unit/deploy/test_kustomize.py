"""deploy/kustomize: what `kubectl kustomize` renders for the base and each overlay (no cluster
needed; tests/integration/deploy/test_kustomize_dryrun.py sends the same to a real API server).

One Deployment per service with probes, resources and a PodDisruptionBudget; only the watcher and
the command-executor get a ServiceAccount token and a ClusterRoleBinding, only the executor's role
writes; NATS JetStream as a StatefulSet (3 routed servers and 3 stream replicas, 1 and 1 in dev);
Redis with AOF on a volume; settings named as KubeRay's chart; the services read them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from raybus.runtime.settings import KubeRayEnv, env_name
from raybus.runtime.settings_reference import settings_class
from raybus_sim.devstack.stack import RBAC_MANIFEST

REPO = Path(__file__).resolve().parents[3]
KUSTOMIZE = REPO / "deploy" / "kustomize"
TARGETS = ["base", "overlays/dev", "overlays/ha"]
# The optional validating webhook is not in the base: components/webhook adds it (overlays/webhook).
OPTIONAL = {"webhook"}
SERVICES = sorted(p.name for p in (REPO / "services").iterdir() if p.is_dir() and p.name not in OPTIONAL)
WRITE = {"create", "update", "patch", "delete", "deletecollection", "*"}
# KubeRay's chart values (helm-chart/kuberay-operator/values.yaml v1.7.0) -> raybus's env.
KUBERAY_SETTINGS = {"featureGates": "RAYBUS_FEATURE_GATES", "batchScheduler.name": "RAYBUS_BATCH_SCHEDULER",
                    "watchNamespace": "RAYBUS_WATCH_NAMESPACE", "kubeClient.qps": "RAYBUS_KUBE_API_QPS",
                    "kubeClient.burst": "RAYBUS_KUBE_API_BURST", "logging.level": "RAYBUS_LOG_LEVEL"}
Doc = dict[str, Any]
# libyaml's loader: the renders hold the CRDs' full schemas (2.5 MB of YAML), a minute's parse in
# pure Python on this machine.
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def render(target: str) -> tuple[Doc, ...]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is needed on PATH (kubectl kustomize renders deploy/kustomize)"
    out = subprocess.run([kubectl, "kustomize", str(KUSTOMIZE / target)], check=True,
                         capture_output=True, text=True, timeout=60).stdout
    return tuple(d for d in yaml.load_all(out, Loader=LOADER) if d)


def of(docs: tuple[Doc, ...], kind: str) -> dict[str, Doc]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def container(workload: Doc) -> Doc:
    containers = workload["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def env_from_config(workload: Doc, config: Doc) -> dict[str, str]:
    """The container's env: literal values, and the values of the ConfigMap keys it references."""
    out: dict[str, str] = {}
    for e in container(workload).get("env", []):
        ref = e.get("valueFrom", {}).get("configMapKeyRef")
        if ref:
            assert ref["name"] == config["metadata"]["name"]  # the generated (hashed) name
            out[e["name"]] = config["data"][ref["key"]]
        elif "value" in e:
            out[e["name"]] = e["value"]
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_one_deployment_per_service_with_probes_resources_and_pdb(target: str) -> None:
    docs = render(target)
    deployments, pdbs = of(docs, "Deployment"), of(docs, "PodDisruptionBudget")
    assert set(deployments) == {f"raybus-{s}" for s in SERVICES}
    for name, d in deployments.items():
        c = container(d)
        assert c["image"] == "ghcr.io/raybus/raybus:0.1.0"  # the one runtime image
        assert c["command"] == [name]  # raybus-<service>: its console script (pyproject)
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert {"cpu", "memory"} <= set(c["resources"]["requests"]) and "memory" in c["resources"]["limits"]
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        metrics = next(e["value"] for e in c["env"] if e["name"] == "RAYBUS_METRICS_PORT")
        assert c["ports"] == [{"name": "metrics", "containerPort": int(metrics)}]
        assert c["livenessProbe"]["httpGet"]["port"] == c["readinessProbe"]["httpGet"]["port"] == "metrics"
        selector = d["spec"]["selector"]["matchLabels"]
        assert pdbs[name]["spec"]["selector"]["matchLabels"] == selector
        assert pdbs[name]["spec"]["maxUnavailable"] == 1
    for d in docs:
        if d["kind"] not in ("CustomResourceDefinition", "Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert d["metadata"]["namespace"] == "raybus-system", d["metadata"]["name"]


@pytest.mark.parametrize("target", TARGETS)
def test_credentials_only_for_the_watcher_the_executor_and_the_poller(target: str) -> None:
    docs = render(target)
    accounts, roles, bindings = of(docs, "ServiceAccount"), of(docs, "ClusterRole"), of(docs, "ClusterRoleBinding")
    assert set(accounts) == {f"raybus-{s}" for s in SERVICES} | {"raybus-bus-bootstrap"}
    assert set(roles) == set(bindings) == {"raybus-watcher", "raybus-command-executor", "raybus-dashboard-poller"}
    # The one namespaced grant: the bus bootstrap Job may create Secrets in raybus-system only.
    (role,) = of(docs, "Role").values()
    assert role["metadata"]["name"] == "raybus-bus-bootstrap"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}]
    assert [b["roleRef"]["name"] for b in of(docs, "RoleBinding").values()] == ["raybus-bus-bootstrap"]
    assert not any(set(r["verbs"]) & WRITE for r in roles["raybus-watcher"]["rules"])
    assert any(set(r["verbs"]) & WRITE for r in roles["raybus-command-executor"]["rules"])
    # the poller reads the Ray objects it admits dashboard commands against, and nothing else
    assert roles["raybus-dashboard-poller"]["rules"] == [{"apiGroups": ["ray.io"], "verbs": ["get", "list", "watch"],
                                                          "resources": ["rayclusters", "rayjobs", "rayservices"]}]
    for name, binding in bindings.items():
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": "raybus-system"}]
    for name, d in of(docs, "Deployment").items():
        spec = d["spec"]["template"]["spec"]
        assert spec["serviceAccountName"] == name
        talks = name in bindings
        assert spec.get("automountServiceAccountToken", True) is talks
        assert accounts[name].get("automountServiceAccountToken", True) is talks


@pytest.mark.parametrize(("target", "servers"), [("base", 3), ("overlays/dev", 1), ("overlays/ha", 3)])
def test_nats_jetstream_statefulset_and_stream_replicas(target: str, servers: int) -> None:
    docs = render(target)
    nats = of(docs, "StatefulSet")["nats"]
    assert nats["spec"]["replicas"] == servers
    assert nats["spec"]["podManagementPolicy"] == "Parallel"
    assert nats["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"
    assert of(docs, "Service")[nats["spec"]["serviceName"]]["spec"]["clusterIP"] == "None"
    config_name = next(v["configMap"]["name"] for v in nats["spec"]["template"]["spec"]["volumes"]
                       if "configMap" in v)
    conf = of(docs, "ConfigMap")[config_name]["data"]["nats.conf"]
    assert "jetstream {" in conf and "store_dir: /data" in conf
    routes = [line.strip() for line in conf.splitlines() if line.strip().startswith("nats://")]
    if servers > 1:
        assert routes == [f"nats://nats-{i}.nats-headless:6222" for i in range(servers)]
    else:
        assert "cluster {" not in conf and not routes
    raybus_config = next(c for n, c in of(docs, "ConfigMap").items() if n.startswith("raybus-config"))
    for d in of(docs, "Deployment").values():
        env = env_from_config(d, raybus_config)
        assert env["RAYBUS_STREAM_REPLICAS"] == str(servers)
        assert env["RAYBUS_NATS_URL"] == "tls://nats:4222"


@pytest.mark.parametrize("target", TARGETS)
def test_redis_keeps_an_append_only_file_on_a_volume(target: str) -> None:
    redis = of(render(target), "StatefulSet")["redis"]
    c = container(redis)
    assert c["args"][c["args"].index("--appendonly") + 1] == "yes"
    assert {"name": "data", "mountPath": "/data"} in c["volumeMounts"]
    assert c["args"][c["args"].index("--dir") + 1] == "/data"
    assert redis["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"


@pytest.mark.parametrize("target", TARGETS)
def test_settings_named_as_kuberay_reach_the_services_that_use_them(target: str) -> None:
    docs = render(target)
    config = next(c for n, c in of(docs, "ConfigMap").items() if n.startswith("raybus-config"))
    assert set(KUBERAY_SETTINGS) <= set(config["data"])
    uses = {"watcher": {"RAYBUS_KUBE_API_QPS", "RAYBUS_KUBE_API_BURST", "RAYBUS_BATCH_SCHEDULER",
                        "RAYBUS_WATCH_NAMESPACE"},
            "command-executor": {"RAYBUS_KUBE_API_QPS", "RAYBUS_KUBE_API_BURST", "RAYBUS_WATCH_NAMESPACE",
                                 *DECIDING},
            "cluster-reconciler": {"RAYBUS_REDIS_URL", *DECIDING},
            "job-reconciler": {"RAYBUS_REDIS_URL", *DECIDING},
            "service-reconciler": {"RAYBUS_REDIS_URL", *DECIDING},
            "dashboard-poller": {"RAYBUS_WATCH_NAMESPACE"}}
    common = {"RAYBUS_NATS_URL", "RAYBUS_STREAM_REPLICAS", "RAYBUS_LOG_LEVEL", "RAYBUS_METRICS_PORT",
              "RAYBUS_METRICS_ADDR", "POD_IP", "RAYBUS_REPLICA_ID", "RAYBUS_NATS_USER", "RAYBUS_NATS_PASSWORD_FILE", "RAYBUS_NATS_CA_FILE",
              "RAYBUS_BUS_DECLARE"}
    redis_auth = {"RAYBUS_REDIS_USER", "RAYBUS_REDIS_PASSWORD_FILE", "RAYBUS_REDIS_CA_FILE"}
    for service in ("cluster-reconciler", "job-reconciler", "service-reconciler"):
        uses[service] |= redis_auth
    for service, names in uses.items():
        d = of(docs, "Deployment")[f"raybus-{service}"]
        env = {e["name"] for e in container(d)["env"]}
        assert env == common | names, service
        # KubeRay's own variables: one ConfigMap for every process that decides or re-checks decisions
        env_from = [s["configMapRef"]["name"] for s in container(d).get("envFrom") or []]
        assert [n.startswith("raybus-operator-env") for n in env_from] == ([True] if names >= DECIDING else [])
        # every env name a service is given is one it reads
        cls = settings_class(service)
        reads = {env_name(n, f) for n, f in cls.model_fields.items()} | set(KubeRayEnv.model_fields)
        for name in env - {"POD_IP"}:  # POD_IP: only for RAYBUS_METRICS_ADDR's $(POD_IP)
            assert name in reads, (service, name)
    assert config["data"]["kubeClient.qps"] == "100" and config["data"]["kubeClient.burst"] == "200"


DECIDING = {"RAYBUS_FEATURE_GATES", "RAYBUS_BATCH_SCHEDULER"}


def test_ha_runs_two_of_each_service_spread_over_nodes() -> None:
    docs = render("overlays/ha")
    for name, d in of(docs, "Deployment").items():
        assert d["spec"]["replicas"] >= 2, name
        term = d["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
            "preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
        assert term["topologyKey"] == "kubernetes.io/hostname"
        assert term["labelSelector"]["matchLabels"] == d["spec"]["selector"]["matchLabels"]
    nats = of(docs, "StatefulSet")["nats"]["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert nats["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] == "kubernetes.io/hostname"
    assert set(of(docs, "PodDisruptionBudget")) >= {"nats", "redis"}


def test_dev_runs_one_of_each() -> None:
    docs = render("overlays/dev")
    assert {d["spec"]["replicas"] for d in of(docs, "Deployment").values()} == {1}
    assert {s["spec"]["replicas"] for s in of(docs, "StatefulSet").values()} == {1}


def test_rbac_file_is_plain_yaml_for_the_local_stack() -> None:
    """raybus up creates the RBAC from this one file (no kustomize), so it names its namespace."""
    assert RBAC_MANIFEST == KUSTOMIZE / "base" / "rbac.yaml"
    docs = [d for d in yaml.safe_load_all(RBAC_MANIFEST.read_text()) if d]
    assert {d["kind"] for d in docs} == {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"}
    assert all(d["metadata"].get("namespace") == "raybus-system" for d in docs if d["kind"] == "ServiceAccount")


def test_an_overlay_moves_the_whole_install_to_another_namespace(tmp_path: Path) -> None:
    """Nothing names raybus-system but the kustomize namespace: NATS routes, Redis and NATS URLs use
    Service names, so `namespace: <yours>` in an overlay moves everything, RBAC subjects included."""
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": [os.path.relpath(KUSTOMIZE / "overlays" / "ha", tmp_path)], "namespace": "ray-ops"}))
    out = subprocess.run([shutil.which("kubectl") or "kubectl", "kustomize", str(tmp_path)], check=True,
                         capture_output=True, text=True, timeout=60).stdout
    assert "raybus-system" not in out
    docs = [d for d in yaml.load_all(out, Loader=LOADER) if d]
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"] == ["ray-ops"]
    subjects = [s for d in docs if d["kind"] == "ClusterRoleBinding" for s in d["subjects"]]
    assert {s["namespace"] for s in subjects} == {"ray-ops"}


@pytest.mark.parametrize("target", TARGETS)
def test_every_service_uses_its_own_bus_credentials_over_tls(target: str) -> None:
    """Issue 18: each Deployment connects as its own role (bus/permissions.py), mounts only its own
    passwords and the CA, and waits for raybus-bus-init instead of declaring streams."""
    docs = render(target)
    raybus_config = next(c for n, c in of(docs, "ConfigMap").items() if n.startswith("raybus-config"))
    assert raybus_config["data"]["nats.url"].startswith("tls://")
    for name, d in of(docs, "Deployment").items():
        role = name.removeprefix("raybus-")
        spec = d["spec"]["template"]["spec"]
        env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
        assert env["RAYBUS_NATS_USER"] == role
        assert env["RAYBUS_BUS_DECLARE"] == "0"
        (bus,) = [v for v in spec["volumes"] if v["name"] == "bus"]
        keys = {i["key"] for i in bus["secret"]["items"]}
        expected = {"ca.pem", f"nats-{role}"} | ({f"redis-{role}"} if role.endswith("reconciler") else set())
        assert keys == expected
        assert d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/part-of"] == "raybus"
    nats = of(docs, "StatefulSet")["nats"]["spec"]["template"]["spec"]
    secret_items = next(v for v in nats["volumes"] if v["name"] == "secrets")["secret"]["items"]
    assert {i["key"] for i in secret_items} == {"nats-auth.conf", "nats-routes.conf", "ca.pem", "server.pem",
                                                "server-key.pem"}
    assert set(of(docs, "Job")) == {"raybus-bus-secrets", "raybus-bus-init"}


def test_the_webhook_component_adds_kuberays_webhooks_and_nothing_else() -> None:
    """overlays/webhook = overlays/dev + components/webhook: the webhook's Deployment (two
    replicas, no token), Service, PDB, KubeRay's three webhooks, and the secrets Job whose RBAC
    names its one Secret and its one webhook configuration."""
    dev, docs = render("overlays/dev"), render("overlays/webhook")
    def keys(rendered: tuple[Doc, ...]) -> set[tuple[str, str]]:  # raybus-config's hash changes: merged key
        return {(d["kind"], d["metadata"]["name"]) for d in rendered if not d["metadata"]["name"].startswith(
            "raybus-config")}
    added = keys(docs) - keys(dev)
    assert added == {("ServiceAccount", "raybus-webhook"), ("Service", "raybus-webhook"),
                     ("Deployment", "raybus-webhook"), ("PodDisruptionBudget", "raybus-webhook"),
                     ("ValidatingWebhookConfiguration", "raybus-validating-webhook"),
                     ("ServiceAccount", "raybus-webhook-bootstrap"), ("Role", "raybus-webhook-bootstrap"),
                     ("RoleBinding", "raybus-webhook-bootstrap"), ("ClusterRole", "raybus-webhook-bootstrap"),
                     ("ClusterRoleBinding", "raybus-webhook-bootstrap"), ("Job", "raybus-webhook-secrets")}
    d = of(docs, "Deployment")["raybus-webhook"]
    c, spec = container(d), d["spec"]["template"]["spec"]
    assert c["command"] == ["raybus-webhook"] and d["spec"]["replicas"] == 2
    assert spec["automountServiceAccountToken"] is False
    assert of(docs, "ServiceAccount")["raybus-webhook"]["automountServiceAccountToken"] is False
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz" and c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    (tls,) = [v for v in spec["volumes"] if v["name"] == "tls"]
    assert tls["secret"] == {"secretName": "raybus-webhook-tls", "items": [
        {"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]}  # not the CA's key
    config = next(cm for n, cm in of(docs, "ConfigMap").items() if n.startswith("raybus-config"))
    assert env_from_config(d, config)["RAYBUS_WEBHOOK_STRICTNESS"] == "kuberay"
    reads = {env_name(n, f) for n, f in settings_class("webhook").model_fields.items()}
    assert {e["name"] for e in c["env"]} <= reads
    service = of(docs, "Service")["raybus-webhook"]["spec"]
    assert service["ports"] == [{"name": "webhook", "port": 443, "targetPort": "webhook"}]
    hooks = of(docs, "ValidatingWebhookConfiguration")["raybus-validating-webhook"]["webhooks"]
    assert [(h["name"], h["clientConfig"]["service"]["path"], h["rules"][0]["resources"]) for h in hooks] == [
        ("vraycluster.kb.io", "/validate-ray-io-v1-raycluster", ["rayclusters"]),
        ("vrayjob.kb.io", "/validate-ray-io-v1-rayjob", ["rayjobs"]),
        ("vrayservice.kb.io", "/validate-ray-io-v1-rayservice", ["rayservices"])]
    for h in hooks:
        assert (h["failurePolicy"], h["sideEffects"], h["admissionReviewVersions"]) == ("Fail", "None", ["v1"])
        assert h["rules"][0]["operations"] == ["CREATE", "UPDATE"] and "caBundle" not in h["clientConfig"]
        assert h["clientConfig"]["service"]["namespace"] == "raybus-system"
    role = of(docs, "Role")["raybus-webhook-bootstrap"]["rules"]
    assert role == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
                    {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["raybus-webhook-tls"],
                     "verbs": ["get", "patch"]}]
    assert of(docs, "ClusterRole")["raybus-webhook-bootstrap"]["rules"] == [{
        "apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingwebhookconfigurations"],
        "resourceNames": ["raybus-validating-webhook"], "verbs": ["get", "patch"]}]
    job = of(docs, "Job")["raybus-webhook-secrets"]["spec"]["template"]["spec"]
    assert job["serviceAccountName"] == "raybus-webhook-bootstrap"
    assert job["containers"][0]["command"][:2] == ["raybus", "webhook-secrets"]
@pytest.mark.parametrize("target", TARGETS)
def test_metrics_listen_on_the_pod_ip_behind_one_metrics_service_per_deployment(target: str) -> None:
    docs = render(target)
    services = of(docs, "Service")
    for name, deployment in of(docs, "Deployment").items():
        env = container(deployment)["env"]
        names = [e["name"] for e in env]
        pod_ip = next(e for e in env if e["name"] == "POD_IP")
        assert pod_ip["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
        addr = next(e for e in env if e["name"] == "RAYBUS_METRICS_ADDR")
        assert addr["value"] == "$(POD_IP),127.0.0.1" and names.index("POD_IP") < names.index("RAYBUS_METRICS_ADDR")
        svc = services[f"{name}-metrics"]
        assert svc["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
        assert svc["spec"]["ports"] == [{"name": "metrics", "port": 9090, "targetPort": "metrics"}]
        assert svc["metadata"]["labels"]["app.kubernetes.io/component"] == "metrics"


def test_the_monitoring_overlay_renders_service_monitors_rules_and_the_dashboard() -> None:
    docs = render("overlays/monitoring")
    monitors = of(docs, "ServiceMonitor")
    metrics_services = {n: s for n, s in of(render("base"), "Service").items() if n.endswith("-metrics")}
    assert len(monitors) == len(metrics_services) == 6
    for name, monitor in monitors.items():
        assert monitor["metadata"]["namespace"] == "raybus-system"
        (endpoint,) = monitor["spec"]["endpoints"]
        assert endpoint["honorLabels"] is True and endpoint["port"] == "metrics"  # as KubeRay's chart
        labels = metrics_services[f"{name}-metrics"]["metadata"]["labels"]
        assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    rule = of(docs, "PrometheusRule")["raybus"]
    alerts = {r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]}
    assert alerts == {"RaybusReconcileErrors", "RaybusConsumerStuck", "RaybusDeadLetters",
                      "RaybusExecutorLag", "RaybusNatsNodeLost"}
    dashboard = of(docs, "ConfigMap")["raybus-grafana-dashboard"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["raybus-dashboard.json"])["uid"] == "raybus"
@pytest.mark.parametrize("target", TARGETS)
def test_no_plaintext_hop_and_no_open_monitoring(target: str) -> None:
    """NATS: routes are mutual TLS (the cluster block includes the routes' tls), its monitoring
    port listens on loopback only (no Service, probes from inside the Pod). Redis: TLS only, no
    plaintext port; every Redis client has the CA and a rediss:// URL."""
    docs = render(target)
    config = next(c for n, c in of(docs, "ConfigMap").items() if n.startswith("nats-config"))["data"]["nats.conf"]
    assert "http: 127.0.0.1:8222" in config and "0.0.0.0:8222" not in config
    if "cluster {" in config:
        cluster = config[config.index("cluster {"):]
        assert 'include "../secrets/nats-routes.conf"' in cluster[:cluster.index("\n}")]
    nats = container(of(docs, "StatefulSet")["nats"])
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert nats[probe]["exec"]["command"][-1].startswith("http://127.0.0.1:8222/healthz"), probe
    assert all(p["containerPort"] != 8222 for p in nats["ports"])
    for service in of(docs, "Service").values():
        assert all(port["port"] != 8222 for port in service["spec"]["ports"]), service["metadata"]["name"]
    redis = container(of(docs, "StatefulSet")["redis"])
    args = redis["args"]
    assert args[args.index("--port") + 1] == "0" and args[args.index("--tls-port") + 1] == "6379"
    assert args[args.index("--tls-auth-clients") + 1] == "no" and "--aclfile" in args
    raybus_config = next(c for n, c in of(docs, "ConfigMap").items() if n.startswith("raybus-config"))
    assert raybus_config["data"]["redis.url"].startswith("rediss://redis:6379/")
    for name, d in of(docs, "Deployment").items():
        env = {e["name"]: e.get("value") for e in container(d)["env"]}
        assert ("RAYBUS_REDIS_URL" in env) == ("RAYBUS_REDIS_USER" in env) == name.endswith("reconciler")
        if "RAYBUS_REDIS_URL" in env:
            assert env["RAYBUS_REDIS_CA_FILE"] == "/etc/raybus/bus/ca.pem"


def test_the_namespaced_overlay_grants_the_base_rules_in_its_watched_namespaces_only() -> None:
    """KubeRay's singleNamespaceInstall: no ClusterRole or ClusterRoleBinding; in each namespace of
    watchNamespace a Role with exactly the rules of the base's ClusterRole of the same name, bound
    to raybus-system's ServiceAccount; everything else as the base renders it."""
    docs, base = render("overlays/namespaced"), render("base")
    assert not of(docs, "ClusterRole") and not of(docs, "ClusterRoleBinding")
    config = next(c for n, c in of(docs, "ConfigMap").items() if n.startswith("raybus-config"))
    watched = config["data"]["watchNamespace"].split(",")
    cluster_roles = of(base, "ClusterRole")
    for ns in watched:
        roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Role" and d["metadata"]["namespace"] == ns}
        bindings = {d["metadata"]["name"]: d for d in docs
                    if d["kind"] == "RoleBinding" and d["metadata"]["namespace"] == ns}
        assert set(roles) == set(bindings) == set(cluster_roles)
        for name, role in roles.items():
            assert role["rules"] == cluster_roles[name]["rules"], name
            assert bindings[name]["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}
            assert bindings[name]["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": "raybus-system"}]
    namespaced = {d["metadata"]["namespace"] for d in docs if d["kind"] in ("Role", "RoleBinding")}
    assert namespaced == {*watched, "raybus-system"}  # and the bus bootstrap's own Role
    strip = {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap"}
    assert sorted((d["kind"], d["metadata"]["name"]) for d in docs if d["kind"] not in strip) == \
        sorted((d["kind"], d["metadata"]["name"]) for d in base if d["kind"] not in strip)
