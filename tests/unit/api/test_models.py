"""API models: lossless round trips of real KubeRay samples, aliases, defaults, loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from raybus.api import (
    RayCluster,
    RayClusterSpec,
    RayCronJob,
    RayJob,
    RayService,
    WorkerGroupSpec,
    parse_manifests,
    parse_object,
    with_defaults,
)
from raybus.api.load import NotARayObject, is_ray_object
from raybus.api.meta import ObjectMeta
from raybus.api.raycluster import HeadGroupSpec
from tests.conftest import SAMPLES

SAMPLE_FILES = sorted(SAMPLES.glob("*.yaml"))
RAY_KINDS = {"RayCluster", "RayJob", "RayService", "RayCronJob"}


def _ray_docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if is_ray_object(d)]


def test_samples_directory_is_populated() -> None:
    assert len(SAMPLE_FILES) >= 60
    kinds = {d["kind"] for f in SAMPLE_FILES for d in _ray_docs(f)}
    assert kinds == RAY_KINDS


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=[p.name for p in SAMPLE_FILES])
def test_sample_round_trips_exactly(path: Path) -> None:
    docs = _ray_docs(path)
    objs = parse_manifests(path.read_text())
    assert [o.kind for o in objs] == [d["kind"] for d in docs]
    for doc, obj in zip(docs, objs, strict=True):
        assert obj.to_manifest() == doc


def test_typed_access_on_sample() -> None:
    (cluster,) = parse_manifests((SAMPLES / "ray-cluster.autoscaler.yaml").read_text())
    assert isinstance(cluster, RayCluster)
    assert cluster.spec.enable_in_tree_autoscaling is True
    group = cluster.spec.worker_group_specs[0] if cluster.spec.worker_group_specs else None
    assert group is not None and group.group_name
    assert isinstance(cluster.spec.head_group_spec.template["spec"]["containers"], list)


def test_unknown_fields_survive_round_trip() -> None:
    doc = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "x", "someFutureMeta": {"a": 1}},
        "spec": {
            "futureTopLevel": [1, 2],
            "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h", "weird": True}]}}},
            "workerGroupSpecs": [{"groupName": "g", "futureGroupField": "v", "scaleStrategy": {"x": 1}}],
        },
        "status": {"futureStatus": "y", "head": {"podIP": "1.2.3.4", "newThing": 2}},
    }
    assert RayCluster.model_validate(doc).to_manifest() == doc


def test_explicit_aliases_match_kuberay_json_tags() -> None:
    status = RayCluster.model_validate(
        {"status": {"desiredCPU": "2", "desiredGPU": "1", "desiredTPU": "0", "head": {"podIP": "a", "serviceIP": "b"}}}
    ).status
    assert status is not None and status.head is not None
    assert (status.desired_cpu, status.desired_gpu, status.desired_tpu) == ("2", "1", "0")
    assert (status.head.pod_ip, status.head.service_ip) == ("a", "b")

    job = RayJob.model_validate(
        {"spec": {"runtimeEnvYAML": "pip: []", "jobId": "j1"}, "status": {"dashboardURL": "u", "rayJobInfo": {}}}
    )
    assert job.spec.runtime_env_yaml == "pip: []" and job.spec.job_id == "j1"
    assert job.status is not None and job.status.dashboard_url == "u" and job.status.ray_job_info is not None

    svc = RayService.model_validate({"spec": {"rayClusterConfig": {"rayVersion": "2.9.0"}, "serveConfigV2": "a: 1"}})
    assert svc.spec.ray_cluster_config.ray_version == "2.9.0"
    assert svc.spec.ray_cluster_spec is svc.spec.ray_cluster_config
    assert svc.to_manifest()["spec"] == {"rayClusterConfig": {"rayVersion": "2.9.0"}, "serveConfigV2": "a: 1"}


def test_construct_by_python_names_dumps_camel_case() -> None:
    cluster = RayCluster(
        metadata=ObjectMeta(name="c"),
        spec=RayClusterSpec(
            head_group_spec=HeadGroupSpec(template={}, ray_start_params={}),
            worker_group_specs=[WorkerGroupSpec(group_name="g", min_replicas=1, num_of_hosts=2)],
            enable_in_tree_autoscaling=True,
        ),
    )
    assert cluster.to_manifest() == {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "c"},
        "spec": {
            "headGroupSpec": {"template": {}, "rayStartParams": {}},
            "workerGroupSpecs": [{"groupName": "g", "minReplicas": 1, "numOfHosts": 2}],
            "enableInTreeAutoscaling": True,
        },
    }


def test_parsing_injects_no_defaults_and_with_defaults_is_pure() -> None:
    doc = {"kind": "RayCluster", "spec": {"headGroupSpec": {}, "workerGroupSpecs": [{"groupName": "g", "maxReplicas": 3}]}}
    cluster = RayCluster.model_validate(doc)
    group = cluster.spec.worker_group_specs[0]
    assert (group.replicas, group.min_replicas, group.num_of_hosts) == (None, None, None)

    defaulted = with_defaults(cluster)
    d_group = defaulted.spec.worker_group_specs[0]
    assert (d_group.replicas, d_group.min_replicas, d_group.max_replicas, d_group.num_of_hosts) == (0, 0, 3, 1)
    assert d_group.ray_start_params == {} and defaulted.spec.head_group_spec.ray_start_params == {}
    # Input untouched: still round-trips to the original document.
    assert cluster.to_manifest() == {"apiVersion": "ray.io/v1", **doc}
    assert group.replicas is None


def test_with_defaults_max_replicas_and_num_of_hosts_zero() -> None:
    cluster = RayCluster.model_validate({"spec": {"workerGroupSpecs": [{"groupName": "g", "numOfHosts": 0}]}})
    group = with_defaults(cluster).spec.worker_group_specs[0]
    # numOfHosts is a non-pointer int32 with omitempty in Go: 0 behaves as unset -> 1.
    assert group.max_replicas == 2**31 - 1 and group.num_of_hosts == 0


def test_with_defaults_rayjob_rayservice_cronjob() -> None:
    job = with_defaults(
        RayJob.model_validate(
            {
                "spec": {
                    "rayClusterSpec": {"workerGroupSpecs": [{"groupName": "g"}]},
                    "deletionStrategy": {"deletionRules": [{"policy": "DeleteSelf", "condition": {"jobStatus": "FAILED"}}]},
                }
            }
        )
    )
    assert job.spec.submission_mode == "K8sJobMode" and job.spec.backoff_limit == 0
    assert job.spec.ttl_seconds_after_finished == 0
    assert job.spec.ray_cluster_spec is not None
    assert job.spec.ray_cluster_spec.worker_group_specs[0].min_replicas == 0
    assert job.spec.deletion_strategy is not None and job.spec.deletion_strategy.deletion_rules is not None
    assert job.spec.deletion_strategy.deletion_rules[0].condition.ttl_seconds == 0

    svc = with_defaults(
        RayService.model_validate(
            {"spec": {"upgradeStrategy": {"type": "NewClusterWithIncrementalUpgrade", "clusterUpgradeOptions": {}}}}
        )
    )
    assert svc.spec.upgrade_strategy is not None and svc.spec.upgrade_strategy.cluster_upgrade_options is not None
    assert svc.spec.upgrade_strategy.cluster_upgrade_options.max_surge_percent == 100

    cron = with_defaults(RayCronJob.model_validate({"spec": {"schedule": "* * * * *", "jobTemplate": {}}}))
    assert cron.spec.job_template.submission_mode == "K8sJobMode"


def test_parse_manifests_skips_other_kinds_and_foreign_groups() -> None:
    text = """
apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
---
apiVersion: other.io/v1
kind: RayCluster
metadata: {name: impostor}
---
---
apiVersion: ray.io/v1
kind: RayJob
metadata: {name: j}
spec: {entrypoint: python x.py}
---
apiVersion: ray.io/v1
kind: RayCronJob
metadata: {name: cj}
spec: {schedule: "*/5 * * * *", jobTemplate: {entrypoint: echo}}
"""
    objs = parse_manifests(text)
    assert [(type(o), o.name) for o in objs] == [(RayJob, "j"), (RayCronJob, "cj")]
    cron = objs[1]
    assert isinstance(cron, RayCronJob) and cron.spec.job_template.entrypoint == "echo"


def test_parse_object_by_kind_and_rejects_others() -> None:
    assert isinstance(parse_object({"apiVersion": "ray.io/v1", "kind": "RayService"}), RayService)
    with pytest.raises(NotARayObject):
        parse_object({"apiVersion": "v1", "kind": "Pod"})


_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10, 10), st.text(max_size=5)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=10,
)
_unknown_keys = st.text(alphabet="abcdefghij", min_size=1, max_size=6).map(lambda k: "x" + k)


@settings(max_examples=100, deadline=None)
@given(
    spec_extra=st.dictionaries(_unknown_keys, _json, max_size=3),
    group_extra=st.dictionaries(_unknown_keys, _json, max_size=3),
    template=st.dictionaries(st.text(max_size=5), _json, max_size=4),
    replicas=st.one_of(st.none(), st.integers(-5, 10)),
)
def test_round_trip_property(
    spec_extra: dict[str, Any], group_extra: dict[str, Any], template: dict[str, Any], replicas: int | None
) -> None:
    group: dict[str, Any] = {"groupName": "g", "template": template, **group_extra}
    if replicas is not None:
        group["replicas"] = replicas
    doc = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "p"},
           "spec": {"headGroupSpec": {"template": template}, "workerGroupSpecs": [group], **spec_extra}}
    assert RayCluster.model_validate(doc).to_manifest() == doc
    job = {"apiVersion": "ray.io/v1", "kind": "RayJob", "spec": {"rayClusterSpec": doc["spec"], **spec_extra}}
    assert RayJob.model_validate(job).to_manifest() == job
