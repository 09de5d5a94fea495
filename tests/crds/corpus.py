"""The CRD verdict corpus: ray.io objects whose accept/reject verdict at `kubectl apply
--dry-run=server --validate=strict` raybus's CRDs must share with KubeRay v1.7.0's.

Deterministic (the same list, ids and objects on every run), built from ../shared/kuberay-samples:
- every ray.io object of every sample, as written;
- on one base object per kind, systematically: an unknown field added to every object node, and
  every node replaced by a value of a wrong type ("unknown fields at every depth, wrong types");
- named mutations: the pod-template typos and bad values users hit, bad quantities, bad enums, CEL
  violations (also on update, for the transition rules), missing required fields, duplicate list-map
  keys, numbers out of KubeRay's minimums, and values both CRDs accept although the Pod would not.

Expected verdicts: tests/crds/kuberay-v1.7.0-verdicts.json (`make crd-verdicts`); the test:
tests/integration/realapi/test_crd_verdicts.py.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "kuberay-samples"
RAY_KINDS = ("RayCluster", "RayJob", "RayService", "RayCronJob")
BASES = {  # one rich sample per kind for the mutations
    "RayCluster": "ray-cluster.complete.yaml",
    "RayJob": "ray-job.sample.yaml",
    "RayService": "ray-service.sample.yaml",
    "RayCronJob": "ray-cronjob.sample.yaml",
}
Json = dict[str, Any]
Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class Case:
    id: str
    obj: Json
    base: Json | None = None  # update cases: this is created for real first, then `obj` applied

    @property
    def kind(self) -> str:
        return str(self.obj["kind"])

    def digest(self) -> str:
        """Identifies the case's content, so a changed case cannot reuse a stale verdict."""
        body = json.dumps({"obj": self.obj, "base": self.base}, sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()[:16]


def _clean(obj: Json) -> Json:
    """A sample as a corpus object: the runner names it and picks the namespace."""
    obj = copy.deepcopy(obj)
    meta = obj.setdefault("metadata", {})
    for key in ("name", "generateName", "namespace"):
        meta.pop(key, None)
    if not meta:
        obj.pop("metadata")
    return obj


def sample_objects() -> list[tuple[str, Json]]:
    out = []
    for path in sorted(SAMPLES.glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
        ray = [d for d in docs if d.get("apiVersion") == "ray.io/v1" and d.get("kind") in RAY_KINDS]
        for i, doc in enumerate(ray):
            out.append((path.name if len(ray) == 1 else f"{path.name}#{i}", _clean(doc)))
    return out


def base(kind: str) -> Json:
    (obj,) = [o for name, o in sample_objects() if name == BASES[kind]]
    return obj


def _walk(node: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, (*path, i))


def _show(path: Path_) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<root>"


def _get(obj: Any, path: Path_) -> Any:
    for part in path:
        obj = obj[part]
    return obj


def _set(obj: Json, path: Path_, value: Any) -> Json:
    out = copy.deepcopy(obj)
    _get(out, path[:-1])[path[-1]] = value
    return out


def _wrong(value: Any) -> Any:
    if isinstance(value, bool):
        return "maybe"
    if isinstance(value, (int, float)):
        return "abc"
    if isinstance(value, str):
        return 12345
    if isinstance(value, dict):
        return "x"
    return {"a": "b"}  # a list


def _schema_paths(obj: Json) -> Iterator[tuple[Path_, Any]]:
    """Nodes the CRD schema judges (apiVersion, kind and the object's own metadata are the API
    server's, the same for any CRD)."""
    for path, node in _walk(obj):
        if path and path[0] in ("apiVersion", "kind", "metadata"):
            continue
        yield path, node


def systematic(kind: str) -> list[Case]:
    obj = base(kind)
    cases = []
    for path, node in _schema_paths(obj):
        if isinstance(node, dict):
            extra = copy.deepcopy(obj)
            _get(extra, path)["raybusUnknownField"] = "x"
            cases.append(Case(f"{kind}/unknown-field@{_show(path)}", extra))
        if path:
            cases.append(Case(f"{kind}/wrong-type@{_show(path)}", _set(obj, path, _wrong(node))))
    return cases


Mutation = Callable[[Json], Json]
HEAD = ("spec", "headGroupSpec", "template", "spec")
HEAD_C = (*HEAD, "containers", 0)
WORKER = ("spec", "workerGroupSpecs", 0)


def _with(path: Path_, value: Any) -> Mutation:
    return lambda o: _set(o, path, value)


def _without(path: Path_) -> Mutation:
    def apply(o: Json) -> Json:
        out = copy.deepcopy(o)
        del _get(out, path[:-1])[path[-1]]
        return out
    return apply


def _merge(path: Path_, extra: Json) -> Mutation:
    def apply(o: Json) -> Json:
        out = copy.deepcopy(o)
        _get(out, path).update(copy.deepcopy(extra))
        return out
    return apply


def _rename(path: Path_, old: str, new: str) -> Mutation:
    def apply(o: Json) -> Json:
        out = copy.deepcopy(o)
        node = _get(out, path)
        node[new] = node.pop(old)
        return out
    return apply


def _duplicate_item(path: Path_) -> Mutation:
    def apply(o: Json) -> Json:
        out = copy.deepcopy(o)
        items = _get(out, path)
        items.append(copy.deepcopy(items[0]))
        return out
    return apply


_ENV = [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
RAYCLUSTER: dict[str, Mutation] = {
    # pod-template typos (unknown fields) and bad values
    "typo containres": _rename(HEAD, "containers", "containres"),
    "typo imagePullPolicyy": _merge(HEAD_C, {"imagePullPolicyy": "Always"}),
    "typo env[].valueFrm": _with((*HEAD_C, "env"), [{"name": "A", "valueFrm": {"fieldRef": {"fieldPath": "x"}}}]),
    "env valueFrom fieldRef": _with((*HEAD_C, "env"), _ENV),
    "typo template.metadata.labelz": _with(("spec", "headGroupSpec", "template", "metadata"), {"labelz": {}}),
    "typo probe httpGet.pth": _merge(HEAD_C, {"livenessProbe": {"httpGet": {"pth": "/", "port": 8265}}}),
    "containerPort abc": _with((*HEAD_C, "ports", 0, "containerPort"), "abc"),
    "containerPort 70000": _with((*HEAD_C, "ports", 0, "containerPort"), 70000),
    "containerPort 1.5": _with((*HEAD_C, "ports", 0, "containerPort"), 1.5),
    "containerPort 2.0": _with((*HEAD_C, "ports", 0, "containerPort"), 2.0),
    "port without containerPort": _with((*HEAD_C, "ports"), [{"name": "gcs"}]),
    "duplicate ports": _with((*HEAD_C, "ports"), [{"containerPort": 1}, {"containerPort": 1}]),
    "same port two protocols": _with((*HEAD_C, "ports"), [{"containerPort": 1}, {"containerPort": 1, "protocol": "UDP"}]),
    "container without name": _without((*HEAD_C, "name")),
    "duplicate container names": _duplicate_item((*HEAD, "containers")),
    "env without name": _with((*HEAD_C, "env"), [{"value": "1"}]),
    "volume without name": _with((*HEAD, "volumes"), [{"emptyDir": {}}]),
    "label value not a string": _with(("spec", "headGroupSpec", "template", "metadata", "labels"), {"a": 1}),
    "annotation value not a string": _with(("spec", "headGroupSpec", "template", "metadata"), {"annotations": {"a": True}}),
    "imagePullPolicy Sometimes (a Pod error)": _merge(HEAD_C, {"imagePullPolicy": "Sometimes"}),
    "restartPolicy Sometimes (a Pod error)": _merge(HEAD, {"restartPolicy": "Sometimes"}),
    "protocol XYZ (a Pod error)": _with((*HEAD_C, "ports", 0, "protocol"), "XYZ"),
    "upper-case container name (a Pod error)": _with((*HEAD_C, "name"), "Ray_Head"),
    # quantities
    **{f"cpu {v!r}": _with((*HEAD_C, "resources", "limits", "cpu"), v)
       for v in ("1x", "1.5.5", "", "-1", "+1", "1e3", "1E", "0.5m", ".5", "1Ki", "1ki", "500 m")},
    **{f"memory {v!r}": _with((*HEAD_C, "resources", "requests", "memory"), v) for v in (0.5, 2, True, "1Gb")},
    "resources.limits not a map": _with((*HEAD_C, "resources", "limits"), ["1"]),
    "gcs storage size 1x": _merge(("spec",), {"gcsFaultToleranceOptions": {"storage": {"size": "1x"}}}),
    # Ray fields: enums, CEL, types, required, defaults
    "autoscaler upscalingMode Fast": _merge(("spec",), {"autoscalerOptions": {"upscalingMode": "Fast"}}),
    "autoscaler version v3": _merge(("spec",), {"autoscalerOptions": {"version": "v3"}}),
    "autoscaler imagePullPolicy Sometimes": _merge(("spec",), {"autoscalerOptions": {"imagePullPolicy": "Sometimes"}}),
    "autoscaler env typo": _merge(("spec",), {"autoscalerOptions": {"env": [{"name": "A", "vale": "1"}]}}),
    "upgradeStrategy Rolling": _merge(("spec",), {"upgradeStrategy": {"type": "Rolling"}}),
    "authOptions mode oauth": _merge(("spec",), {"authOptions": {"mode": "oauth"}}),
    "gcs backend etcd": _merge(("spec",), {"gcsFaultToleranceOptions": {"backend": "etcd"}}),
    "networkPolicy mode AllowAll": _merge(("spec",), {"networkPolicy": {"mode": "AllowAll"}}),
    "networkPolicy workerGroups duplicate": _merge(("spec",), {"networkPolicy": {"workerGroups": [
        {"groupName": "a"}, {"groupName": "a"}]}}),
    "networkPolicy ingress rule typo": _merge(("spec",), {"networkPolicy": {"head": {"ingressRules": [
        {"form": []}]}}}),
    "ingressOptions pathType Foo": _merge(("spec", "headGroupSpec"), {"ingressOptions": {"pathType": "Foo"}}),
    "serviceType Foo (no enum)": _merge(("spec", "headGroupSpec"), {"serviceType": "Foo"}),
    "headService spec typo": _merge(("spec", "headGroupSpec"), {"headService": {"spec": {"prots": []}}}),
    "headService port abc": _merge(("spec", "headGroupSpec"), {"headService": {"spec": {"ports": [
        {"port": "abc"}]}}}),
    "managedBy bad value": _merge(("spec",), {"managedBy": "someone-else"}),
    "managedBy kueue": _merge(("spec",), {"managedBy": "kueue.x-k8s.io/multikueue"}),
    "replicas abc": _with((*WORKER, "replicas"), "abc"),
    "replicas 2147483648": _with((*WORKER, "replicas"), 2147483648),
    "replicas -1": _with((*WORKER, "replicas"), -1),
    "minReplicas > maxReplicas (an operator check)": _merge(WORKER, {"minReplicas": 5, "maxReplicas": 1}),
    "worker without minReplicas/maxReplicas (defaulted)": lambda o: _without((*WORKER, "maxReplicas"))(
        _without((*WORKER, "minReplicas"))(o)),
    "worker without groupName": _without((*WORKER, "groupName")),
    "worker without template": _without((*WORKER, "template")),
    "duplicate worker group names (a webhook check)": _duplicate_item(("spec", "workerGroupSpecs")),
    "without headGroupSpec": _without(("spec", "headGroupSpec")),
    "rayStartParams value not a string": _with(("spec", "headGroupSpec", "rayStartParams"), {"num-cpus": 1}),
    "enableInTreeAutoscaling yes": _merge(("spec",), {"enableInTreeAutoscaling": "yes"}),
    "top-level unknown field": _merge((), {"spex": {}}),
    "unknown field in metadata": _merge((), {"metadata": {"labelz": {}}}),
    "null template metadata": _with(("spec", "headGroupSpec", "template", "metadata"), None),
}
RAYJOB: dict[str, Mutation] = {
    "submitterPodTemplate typo": _merge(("spec",), {"submitterPodTemplate": {"spec": {"containres": []}}}),
    "submitterPodTemplate container without name": _merge(("spec",), {"submitterPodTemplate": {
        "spec": {"containers": [{"image": "x"}]}}}),
    "deletionStrategy onSuccess only": _merge(("spec",), {"deletionStrategy": {"onSuccess": {"policy": "DeleteCluster"}}}),
    "deletionStrategy legacy and rules": _merge(("spec",), {"deletionStrategy": {
        "onSuccess": {"policy": "DeleteCluster"}, "onFailure": {"policy": "DeleteNone"},
        "deletionRules": [{"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED"}}]}}),
    "deletionRules empty": _merge(("spec",), {"deletionStrategy": {"deletionRules": []}}),
    "deletionRule policy DeleteAll": _merge(("spec",), {"deletionStrategy": {"deletionRules": [
        {"policy": "DeleteAll", "condition": {"jobStatus": "SUCCEEDED"}}]}}),
    "deletionRule both statuses": _merge(("spec",), {"deletionStrategy": {"deletionRules": [
        {"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Failed"}}]}}),
    "deletionRule no status": _merge(("spec",), {"deletionStrategy": {"deletionRules": [
        {"policy": "DeleteCluster", "condition": {"ttlSeconds": 5}}]}}),
    "deletionRule ttlSeconds -1": _merge(("spec",), {"deletionStrategy": {"deletionRules": [
        {"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED", "ttlSeconds": -1}}]}}),
    "deletionRule jobStatus RUNNING": _merge(("spec",), {"deletionStrategy": {"deletionRules": [
        {"policy": "DeleteCluster", "condition": {"jobStatus": "RUNNING"}}]}}),
    "deletionRules valid": _merge(("spec",), {"deletionStrategy": {"deletionRules": [
        {"policy": "DeleteWorkers", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 10}},
        {"policy": "DeleteCluster", "condition": {"jobDeploymentStatus": "Failed"}}]}}),
    "preRunningDeadlineSeconds 0": _merge(("spec",), {"preRunningDeadlineSeconds": 0}),
    "submissionMode Foo (an operator check)": _merge(("spec",), {"submissionMode": "Foo"}),
    "entrypointNumCpus 0.5": _merge(("spec",), {"entrypointNumCpus": 0.5}),
    "entrypointNumCpus abc": _merge(("spec",), {"entrypointNumCpus": "abc"}),
    "managedBy bad value": _merge(("spec",), {"managedBy": "someone-else"}),
    "clusterSelector value not a string": _merge(("spec",), {"clusterSelector": {"a": 1}}),
    "rayClusterSpec container typo": _rename(("spec", "rayClusterSpec", "headGroupSpec", "template", "spec"),
                                             "containers", "containres"),
    "rayClusterSpec cpu 1x": _with(("spec", "rayClusterSpec", "headGroupSpec", "template", "spec", "containers", 0,
                                    "resources", "limits", "cpu"), "1x"),
}
RAYSERVICE: dict[str, Mutation] = {
    "serveService typo": _merge(("spec",), {"serveService": {"spec": {"typ": "ClusterIP"}}}),
    "serveService port without port": _merge(("spec",), {"serveService": {"spec": {"ports": [{"name": "a"}]}}}),
    "rayClusterDeletionDelaySeconds -1": _merge(("spec",), {"rayClusterDeletionDelaySeconds": -1}),
    "upgradeStrategy options without required": _merge(("spec",), {"upgradeStrategy": {
        "type": "NewClusterWithIncrementalUpgrade", "clusterUpgradeOptions": {"maxSurgePercent": 50}}}),
    "without rayClusterConfig": _without(("spec", "rayClusterConfig")),
    "rayClusterConfig worker typo": _merge(("spec", "rayClusterConfig", "workerGroupSpecs", 0), {"replica": 1}),
    "managedBy bad value": _merge(("spec",), {"managedBy": "someone-else"}),
}
RAYCRONJOB: dict[str, Mutation] = {
    "timeZone empty": _merge(("spec",), {"timeZone": ""}),
    "timeZone Europe/Paris": _merge(("spec",), {"timeZone": "Europe/Paris"}),
    "without schedule": _without(("spec", "schedule")),
    "without jobTemplate": _without(("spec", "jobTemplate")),
    "jobTemplate typo": _merge(("spec", "jobTemplate"), {"entrypont": "x"}),
    "suspend yes": _merge(("spec",), {"suspend": "yes"}),
}
NAMED = {"RayCluster": RAYCLUSTER, "RayJob": RAYJOB, "RayService": RAYSERVICE, "RayCronJob": RAYCRONJOB}

# Updates (the object is created with `base`, then `obj` is applied): CEL transition rules.
_REDIS = {"gcsFaultToleranceOptions": {"backend": "redis", "redisAddress": "redis:6379"}}
UPDATES: dict[str, tuple[str, Mutation, Mutation]] = {
    "managedBy changed": ("RayCluster", _merge(("spec",), {"managedBy": "ray.io/kuberay-operator"}),
                          _merge(("spec",), {"managedBy": "kueue.x-k8s.io/multikueue"})),
    "managedBy kept": ("RayJob", _merge(("spec",), {"managedBy": "kueue.x-k8s.io/multikueue"}),
                       _merge(("spec",), {"managedBy": "kueue.x-k8s.io/multikueue", "entrypoint": "echo"})),
    "gcs backend changed": ("RayCluster", _merge(("spec",), _REDIS),
                            _merge(("spec",), {"gcsFaultToleranceOptions": {"backend": "rocksdb"}})),
    "replicas changed": ("RayCluster", lambda o: o, _with((*WORKER, "replicas"), 3)),
}


def cases() -> list[Case]:
    out = [Case(f"sample/{name}", obj) for name, obj in sample_objects()]
    for kind, mutations in NAMED.items():
        obj = base(kind)
        out += [Case(f"{kind}/{what}", mutate(obj)) for what, mutate in mutations.items()]
    for what, (kind, before, after) in UPDATES.items():
        obj = base(kind)
        out.append(Case(f"{kind}/update {what}", after(before(obj)), base=before(obj)))
    for kind in RAY_KINDS:
        out += systematic(kind)
    ids = [c.id for c in out]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    return out
