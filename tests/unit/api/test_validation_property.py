"""Property: validation is total. Arbitrary (often nonsensical) specs never raise; they only ever
produce lists of strings. Built both from typed models (st.builds) and from raw JSON-ish dicts
pushed through the parser, since objects from the API server are not guaranteed to be sane."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raybus.api import (
    AutoscalerOptions,
    GcsFaultToleranceOptions,
    HeadGroupSpec,
    RayCluster,
    RayClusterSpec,
    RayJob,
    RayService,
    WorkerGroupSpec,
)
from raybus.api.load import KINDS
from raybus.api.meta import ObjectMeta
from raybus.api.settings import FeatureGates
from raybus.api.validation import validate

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=6))
json_values = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=12,
)
_names = st.sampled_from(["", "a", "ray-head", "Bad_Name", "x" * 60, "RAY_enable_autoscaler_v2", "REDIS_PASSWORD",
                          "RAY_REDIS_ADDRESS", "token", "v2", "rocksdb", "Never", "Always", "2.52.0", "ray.io/cluster"])
_small_ints = st.one_of(st.none(), st.integers(-3, 7))


def _template() -> st.SearchStrategy[dict[str, Any]]:
    env = st.fixed_dictionaries({"name": _names, "value": st.one_of(_names, st.just("true"))})
    container = st.fixed_dictionaries({"name": _names}, optional={"env": st.lists(env, max_size=2)})
    spec = st.fixed_dictionaries(
        {}, optional={"containers": st.lists(container, max_size=2), "restartPolicy": _names}
    )
    return st.one_of(st.fixed_dictionaries({}, optional={"spec": spec}), st.dictionaries(st.text(max_size=4), json_values))


_str_maps = st.one_of(st.none(), st.dictionaries(_names, _names, max_size=2))
cluster_specs = st.builds(
    RayClusterSpec,
    head_group_spec=st.builds(HeadGroupSpec, template=_template(), ray_start_params=_str_maps, labels=_str_maps,
                              resources=_str_maps),
    worker_group_specs=st.one_of(st.none(), st.lists(st.builds(
        WorkerGroupSpec, group_name=_names, replicas=_small_ints, min_replicas=_small_ints, max_replicas=_small_ints,
        num_of_hosts=_small_ints, idle_timeout_seconds=_small_ints, priority=_small_ints, template=_template(),
        ray_start_params=_str_maps, labels=_str_maps, suspend=st.one_of(st.none(), st.booleans())), max_size=3)),
    ray_version=st.one_of(st.none(), _names),
    enable_in_tree_autoscaling=st.one_of(st.none(), st.booleans()),
    autoscaler_options=st.one_of(st.none(), st.builds(AutoscalerOptions, version=st.one_of(st.none(), _names),
                                                      idle_timeout_seconds=_small_ints)),
    gcs_fault_tolerance_options=st.one_of(st.none(), st.builds(GcsFaultToleranceOptions, backend=st.one_of(
        st.none(), _names), redis_address=st.one_of(st.none(), _names))),
    managed_by=st.one_of(st.none(), _names),
)
gates = st.builds(FeatureGates, **{name: st.booleans() for name in FeatureGates.model_fields})
metas = st.builds(ObjectMeta, name=st.one_of(st.none(), _names), annotations=_str_maps, labels=_str_maps)


def _assert_strings(result: object) -> None:
    assert isinstance(result, list)
    assert all(isinstance(m, str) and m for m in result)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=cluster_specs, meta=metas, gate=gates)
def test_built_specs_never_raise(spec: RayClusterSpec, meta: ObjectMeta, gate: FeatureGates) -> None:
    _assert_strings(validate(RayCluster(metadata=meta, spec=spec), settings=gate))
    _assert_strings(validate(RayJob.model_validate({"metadata": {"name": "j"},
                                                    "spec": {"rayClusterSpec": spec.to_dict()}}), settings=gate))
    _assert_strings(validate(RayService(metadata=meta, spec={"rayClusterConfig": spec}), settings=gate))


_job_fields = st.fixed_dictionaries({}, optional={
    "submissionMode": _names, "backoffLimit": _small_ints, "suspend": st.booleans(),
    "shutdownAfterJobFinishes": st.booleans(), "ttlSecondsAfterFinished": _small_ints,
    "clusterSelector": _str_maps, "runtimeEnvYAML": st.text(max_size=12), "activeDeadlineSeconds": _small_ints,
    "deletionStrategy": st.fixed_dictionaries({}, optional={
        "onSuccess": st.fixed_dictionaries({}, optional={"policy": st.sampled_from(["DeleteCluster", "DeleteNone", "x"])}),
        "onFailure": st.fixed_dictionaries({}, optional={"policy": st.sampled_from(["DeleteWorkers", "DeleteSelf"])}),
        "deletionRules": st.lists(st.fixed_dictionaries({
            "policy": st.sampled_from(["DeleteCluster", "DeleteWorkers", "DeleteSelf", "DeleteNone", "?"]),
            "condition": st.fixed_dictionaries({}, optional={
                "jobStatus": st.sampled_from(["SUCCEEDED", "FAILED", "RUNNING"]),
                "jobDeploymentStatus": st.sampled_from(["Failed", "Complete"]),
                "ttlSeconds": _small_ints})}), max_size=3)}),
})


@settings(max_examples=150, deadline=None)
@given(fields=_job_fields, gate=gates)
def test_arbitrary_rayjob_specs_never_raise(fields: dict[str, Any], gate: FeatureGates) -> None:
    doc = {"kind": "RayJob", "metadata": {"name": "j"}, "spec": {**fields}}
    _assert_strings(validate(RayJob.model_validate(doc), settings=gate))


@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(sorted(KINDS)),
    spec=st.dictionaries(st.sampled_from(["serveConfigV2", "upgradeStrategy", "schedule", "timeZone", "jobTemplate",
                                          "rayClusterDeletionDelaySeconds", "unknown"]), json_values, max_size=4),
    annotations=_str_maps,
    gate=gates,
)
def test_raw_dicts_that_parse_never_make_validation_raise(
    kind: str, spec: dict[str, Any], annotations: dict[str, str] | None, gate: FeatureGates
) -> None:
    doc = {"kind": kind, "metadata": {"name": "n", "annotations": annotations}, "spec": spec}
    try:
        obj = KINDS[kind].model_validate(doc)
    except ValueError:
        return  # the parser may reject wrong types; validation is only reached for parsed objects
    _assert_strings(validate(obj, settings=gate))
