"""Table-driven RayCluster validation: one row per KubeRay rule, message checked verbatim (or by its
distinctive part), plus the valid base producing no message at all."""

from __future__ import annotations

import pytest

from raybus.api import RayCluster
from raybus.api.settings import FeatureGates
from raybus.api.validation import validate_raycluster, validate_raycluster_spec
from tests.unit.api.builders import Doc, Mutation, head_container, mutated, raycluster, worker

ALL_GATES = FeatureGates(**{name: True for name in FeatureGates.model_fields})


def _set(path: str, value: object) -> Mutation:
    def apply(doc: Doc) -> None:
        *parents, last = path.split(".")
        node = doc
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return apply


def _spec(fn: Mutation) -> Mutation:
    return lambda doc: fn(doc["spec"])


def _env(name: str, value: str = "x") -> Mutation:
    return _spec(lambda s: head_container(s).__setitem__("env", [{"name": name, "value": value}]))


def _autoscale(version: str | None = None) -> Mutation:
    def apply(doc: Doc) -> None:
        doc["spec"]["enableInTreeAutoscaling"] = True
        if version:
            doc["spec"]["autoscalerOptions"] = {"version": version}

    return apply


def _both(*fns: Mutation) -> Mutation:
    def apply(doc: Doc) -> None:
        for fn in fns:
            fn(doc)

    return apply


CASES: list[tuple[str, Mutation, str]] = [
    ("name too long", _set("metadata.name", "a" * 54), "RayCluster name should be no more than 53 characters"),
    ("name not dns1035", _set("metadata.name", "1abc"), "RayCluster name should be a valid DNS1035 label: [a DNS-1035"),
    ("uppercase name", _set("metadata.name", "Demo"), "RayCluster name should be a valid DNS1035 label"),
    ("managedBy other", _set("spec.managedBy", "me"),
     "the managedBy field value must be either 'ray.io/kuberay-operator' or 'kueue.x-k8s.io/multikueue'"),
    ("duplicate group names", _spec(lambda s: s["workerGroupSpecs"].append(dict(worker(s)))),
     'spec.workerGroupSpecs[1]: Invalid value: "small": worker group names must be unique'),
    ("no head container", _spec(lambda s: s["headGroupSpec"]["template"]["spec"].__setitem__("containers", [])),
     "headGroupSpec should have at least one container"),
    ("no worker container", _spec(lambda s: worker(s)["template"]["spec"].__setitem__("containers", [])),
     "workerGroupSpec should have at least one container"),
    ("min > max", _spec(lambda s: worker(s).update(minReplicas=6)),
     "worker group small has minReplicas 6 greater than maxReplicas 5"),
    ("negative min", _spec(lambda s: worker(s).update(minReplicas=-1)), "worker group small has negative minReplicas -1"),
    ("negative max", _spec(lambda s: worker(s).update(maxReplicas=-2)), "worker group small has negative maxReplicas -2"),
    ("numOfHosts zero", _spec(lambda s: worker(s).update(numOfHosts=0)),
     "worker group small has numOfHosts 0; numOfHosts must be at least 1"),
    ("resources twice", _spec(lambda s: worker(s).update(rayStartParams={"num-cpus": "1"}, resources={"CPU": "1"})),
     "resource fields should not be set in both rayStartParams and Resources for small group; please use only one"),
    ("head resources twice",
     _spec(lambda s: s["headGroupSpec"].update(rayStartParams={"memory": "1"}, resources={"x": "1"})),
     "resource fields should not be set in both rayStartParams and Resources for Head group"),
    ("labels in rayStartParams", _spec(lambda s: worker(s).update(rayStartParams={"labels": "a=b"})),
     "rayStartParams['labels'] is not supported for small group; please use the top-level Labels field instead"),
    ("bad label key", _spec(lambda s: worker(s).update(labels={"a/b/c": "v"})),
     "invalid label key for small group: 'a/b/c', error: a qualified name must consist of"),
    ("bad label value", _spec(lambda s: worker(s).update(labels={"k": "bad value"})),
     "invalid label value for key 'k' in small group: 'bad value', error: a valid label must be an empty string"),
    ("ft annotation and options",
     _both(_set("metadata.annotations", {"ray.io/ft-enabled": "true"}),
           _set("spec.gcsFaultToleranceOptions", {"redisAddress": "redis:6379"})),
     ("ray.io/ft-enabled annotation and GcsFaultToleranceOptions are both set. Please use only "
     "GcsFaultToleranceOptions to configure GCS fault tolerance")),
    ("redis address env without FT", _env("RAY_REDIS_ADDRESS"),
     "RAY_REDIS_ADDRESS is set which implicitly enables GCS fault tolerance, but GcsFaultToleranceOptions is not set"),
    ("redis-password param with FT",
     _both(_set("spec.gcsFaultToleranceOptions", {"redisAddress": "r:6379"}),
           _spec(lambda s: s["headGroupSpec"].update(rayStartParams={"redis-password": "p"}))),
     "cannot set `redis-password` in rayStartParams when GcsFaultToleranceOptions is enabled"),
    ("REDIS_PASSWORD env with FT",
     _both(_set("spec.gcsFaultToleranceOptions", {"redisAddress": "r:6379"}), _env("REDIS_PASSWORD")),
     "cannot set `REDIS_PASSWORD` env var in head Pod when GcsFaultToleranceOptions is enabled"),
    ("RAY_REDIS_ADDRESS env with FT",
     _both(_set("spec.gcsFaultToleranceOptions", {"redisAddress": "r:6379"}), _env("RAY_REDIS_ADDRESS")),
     ("cannot set `RAY_REDIS_ADDRESS` env var in head Pod when GcsFaultToleranceOptions is enabled - use "
     "GcsFaultToleranceOptions.RedisAddress instead")),
    ("external storage annotation with FT",
     _both(_set("spec.gcsFaultToleranceOptions", {"redisAddress": "r:6379"}),
           _set("metadata.annotations", {"ray.io/external-storage-namespace": "ns"})),
     "cannot set `ray.io/external-storage-namespace` annotation when GcsFaultToleranceOptions is enabled"),
    ("redis username env", _env("REDIS_USERNAME"),
     ("cannot set redis username in rayStartParams or environment variables - use "
     "GcsFaultToleranceOptions.RedisUsername instead")),
    ("storage with redis backend", _set("spec.gcsFaultToleranceOptions", {"redisAddress": "r", "storage": {}}),
     "cannot set GcsFaultToleranceOptions.Storage when backend is 'redis'"),
    ("rocksdb with redis address", _set("spec.gcsFaultToleranceOptions", {"backend": "rocksdb", "redisAddress": "r"}),
     "cannot set GcsFaultToleranceOptions.RedisAddress when backend is 'rocksdb'"),
    ("rocksdb claimName with size",
     _set("spec.gcsFaultToleranceOptions", {"backend": "rocksdb", "storage": {"claimName": "c", "size": "1Gi"}}),
     "GcsFaultToleranceOptions.Storage.ClaimName is mutually exclusive with size, storageClassName, and accessModes"),
    ("autoscaler v2 env while autoscaling off", _env("RAY_enable_autoscaler_v2", "true"),
     "environment variable RAY_enable_autoscaler_v2 cannot be set to 'true' when enableInTreeAutoscaling is false"),
    ("suspend group with autoscaler", _both(_autoscale(), _spec(lambda s: worker(s).update(suspend=True))),
     "worker group small cannot be suspended with Autoscaler enabled"),
    ("version and env both", _both(_autoscale("v2"), _env("RAY_enable_autoscaler_v2", "1")),
     ("both .spec.autoscalerOptions.version and head Pod env var RAY_enable_autoscaler_v2 are set, please only use "
     "the former")),
    ("v2 head restartPolicy", _both(_autoscale("v2"),
                                    _spec(lambda s: s["headGroupSpec"]["template"]["spec"].update(restartPolicy="Always"))),
     "restartPolicy for head Pod should be Never or unset when using autoscaler V2"),
    ("v2 worker restartPolicy", _both(_autoscale("v2"),
                                      _spec(lambda s: worker(s)["template"]["spec"].update(restartPolicy="OnFailure"))),
     "restartPolicy for worker group small should be Never or unset when using autoscaler V2"),
    ("idleTimeout without v2", _spec(lambda s: worker(s).update(idleTimeoutSeconds=30)),
     ("worker group small: idleTimeoutSeconds is set, but autoscaler v2 is not enabled. Please set "
     ".spec.autoscalerOptions.version to 'v2'")),
    ("negative idleTimeout", _spec(lambda s: worker(s).update(idleTimeoutSeconds=-1)),
     "worker group small: idleTimeoutSeconds must be non-negative, got -1"),
    ("negative autoscaler idleTimeout", _set("spec.autoscalerOptions", {"idleTimeoutSeconds": -5}),
     "autoscalerOptions.idleTimeoutSeconds must be non-negative, got -5"),
    ("KUBERAY_GEN_AUTOSCALER_START_CMD in autoscaler env",
     _set("spec.autoscalerOptions", {"env": [{"name": "KUBERAY_GEN_AUTOSCALER_START_CMD", "value": "x"}]}),
     "autoscalerOptions.env must not contain KUBERAY_GEN_AUTOSCALER_START_CMD"),
    ("bad upscalingMode", _set("spec.autoscalerOptions", {"upscalingMode": "Fast"}),
     'spec.autoscalerOptions.upscalingMode: Unsupported value: "Fast"'),
    ("priority without ray version",
     _both(_set("spec.rayVersion", ""), _spec(lambda s: worker(s).update(priority=2))),
     "worker group small: priority is set, but RayVersion was not specified. Ray version 2.56.0 or later is required"),
    ("priority old ray", _spec(lambda s: worker(s).update(priority=2)),
     "worker group small: priority is set, but minimum Ray version is 2.56.0, got 2.52.0"),
    ("priority without v2", _both(_set("spec.rayVersion", "2.56.0"), _spec(lambda s: worker(s).update(priority=2))),
     "worker group small: priority is set to 2, but autoscaler v2 is not enabled"),
    ("token auth without version", _both(_set("spec.rayVersion", ""), _set("spec.authOptions", {"mode": "token"})),
     "authOptions.mode is 'token' but RayVersion was not specified. Ray version 2.52.0 or later is required"),
    ("token auth old ray", _both(_set("spec.rayVersion", "2.9.0"), _set("spec.authOptions", {"mode": "token"})),
     "authOptions.mode is 'token' but minimum Ray version is 2.52.0, got 2.9.0"),
    ("token auth bad version", _both(_set("spec.rayVersion", "latest"), _set("spec.authOptions", {"mode": "token"})),
     "authOptions.mode is 'token' but RayVersion format is invalid: latest"),
    ("k8s auth without token", _set("spec.authOptions", {"enableK8sTokenAuth": True}),
     "authOptions.enableK8sTokenAuth is enabled but authOptions.mode not set to 'token'"),
    ("k8s auth old ray", _set("spec.authOptions", {"mode": "token", "enableK8sTokenAuth": True}),
     "authOptions.enableK8sTokenAuth is enabled but minimum Ray version is 2.55.0, got 2.52.0"),
    ("k8s auth with secret",
     _both(_set("spec.rayVersion", "2.55.0"),
           _set("spec.authOptions", {"mode": "token", "enableK8sTokenAuth": True, "secretName": "s"})),
     "authOptions.enableK8sTokenAuth is enabled and authOptions.secretName is also set"),
    ("upgradeStrategy value", _set("spec.upgradeStrategy", {"type": "Rolling"}),
     ("The RayCluster spec is invalid: Spec.UpgradeStrategy.Type value Rolling is invalid, valid options are "
     "Recreate or None")),
    ("upgradeStrategy on RayJob-owned cluster",
     _both(_set("spec.upgradeStrategy", {"type": "Recreate"}),
           _set("metadata.labels", {"ray.io/originated-from-crd": "RayJob"})),
     "upgradeStrategy cannot be set when RayCluster is created by RayJob"),
    ("suspending and suspended", _set("status", {"conditions": [
        {"type": "RayClusterSuspending", "status": "True"}, {"type": "RayClusterSuspended", "status": "True"}]}),
     ("invalid RayCluster State: rayv1.RayClusterSuspending and rayv1.RayClusterSuspended conditions should not be "
     "both true")),
    ("network policy unknown group",
     _set("spec.networkPolicy", {"workerGroups": [{"groupName": "nope"}]}),
     'networkPolicy.workerGroups["nope"] does not match any group name in workerGroupSpecs'),
    ("network policy ingress rules under DenyAllEgress",
     _set("spec.networkPolicy", {"mode": "DenyAllEgress", "head": {"ingressRules": [{}]}}),
     'networkPolicy.head.ingressRules cannot be set when mode is "DenyAllEgress" (ingress is not restricted)'),
    ("tls env conflict", _both(_set("spec.tlsOptions", {"enabled": True}), _env("RAY_USE_TLS", "1")),
     "cannot set RAY_USE_TLS environment variable in head Pod when tlsOptions is set"),
    ("history server without collector", _set("spec.historyServerOptions", {}),
     "historyServerOptions.collectorOptions must be set"),
]


@pytest.mark.parametrize(("mutation", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule(mutation: Mutation, expected: str) -> None:
    base = RayCluster.model_validate(raycluster())
    assert validate_raycluster(base, settings=ALL_GATES) == []
    problems = validate_raycluster(RayCluster.model_validate(mutated(raycluster(), mutation)), settings=ALL_GATES)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize(
    ("field", "value", "gate", "message"),
    [
        ("networkPolicy", {}, "ray_cluster_network_policy",
         "spec.networkPolicy requires the RayClusterNetworkPolicy feature gate to be enabled"),
        ("tlsOptions", {"enabled": True}, "ray_cluster_mtls",
         "spec.tlsOptions requires the RayClusterMTLS feature gate to be enabled"),
        ("historyServerOptions", {"collectorOptions": {"image": "c"}}, "ray_cluster_history_server",
         "RayClusterHistoryServer feature gate is not enabled"),
        ("gcsFaultToleranceOptions", {"backend": "rocksdb"}, "gcs_fault_tolerance_embedded_storage",
         "requires the GCSFaultToleranceEmbeddedStorage feature gate to be enabled"),
    ],
)
def test_feature_gated_fields(field: str, value: object, gate: str, message: str) -> None:
    cluster = RayCluster.model_validate(mutated(raycluster(), _set(f"spec.{field}", value)))
    assert validate_raycluster(cluster, settings=ALL_GATES) == []
    off = ALL_GATES.model_copy(update={gate: False})
    assert any(message in p for p in validate_raycluster(cluster, settings=off))


def test_suspended_worker_group_needs_deletion_policy_gate() -> None:
    cluster = RayCluster.model_validate(mutated(raycluster(), _spec(lambda s: worker(s).update(suspend=True))))
    assert validate_raycluster(cluster) == []
    off = FeatureGates(ray_job_deletion_policy=False)
    assert validate_raycluster(cluster, settings=off) == [
        "worker group small can be suspended only when the RayJobDeletionPolicy feature gate is enabled"
    ]


def test_replicas_outside_min_max_is_not_an_error() -> None:
    # KubeRay clamps replicas into [minReplicas, maxReplicas] instead of rejecting the spec.
    for replicas in (0, 99, -3):
        doc = raycluster()
        worker(doc["spec"])["replicas"] = replicas
        assert validate_raycluster(RayCluster.model_validate(doc)) == []


def test_min_max_required_only_without_defaults_or_autoscaling() -> None:
    doc = mutated(raycluster(), _spec(lambda s: [worker(s).pop("minReplicas"), worker(s).pop("maxReplicas")]))
    spec = RayCluster.model_validate(doc).spec
    # The API server applies CRD defaults before KubeRay sees the object, so this passes by default...
    assert validate_raycluster_spec(spec) == []
    # ...but the raw spec trips KubeRay's check, unless autoscaling owns the bounds.
    assert validate_raycluster_spec(spec, apply_crd_defaults=False) == [
        "worker group small must set both minReplicas and maxReplicas when autoscaling is disabled"
    ]
    autoscaled = spec.model_copy(update={"enable_in_tree_autoscaling": True})
    assert validate_raycluster_spec(autoscaled, apply_crd_defaults=False) == []


def test_generate_name_is_validated_with_generated_suffix() -> None:
    doc = raycluster()
    doc["metadata"] = {"generateName": "demo-"}
    assert validate_raycluster(RayCluster.model_validate(doc)) == []
    doc["metadata"] = {"generateName": "x" * 49 + "-"}  # 50 + 5 generated chars > 53
    assert validate_raycluster(RayCluster.model_validate(doc)) == [
        "RayCluster name should be no more than 53 characters"
    ]


def test_independent_problems_are_all_reported() -> None:
    doc = mutated(raycluster(), _both(_set("metadata.name", "Bad_Name"), _spec(lambda s: worker(s).update(minReplicas=9))))
    problems = validate_raycluster(RayCluster.model_validate(doc))
    assert len(problems) == 2
    assert problems[0].startswith("RayCluster name should be a valid DNS1035 label")
    assert problems[1] == "worker group small has minReplicas 9 greater than maxReplicas 5"


def test_malformed_template_does_not_crash() -> None:
    doc = raycluster()
    doc["spec"]["headGroupSpec"]["template"] = {"spec": "not-a-dict"}
    doc["spec"]["workerGroupSpecs"][0]["template"] = {"spec": {"containers": ["oops", 3]}}
    problems = validate_raycluster(RayCluster.model_validate(doc))
    assert problems == ["headGroupSpec should have at least one container"]
