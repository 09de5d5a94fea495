"""constructRayClusterForRayJob, the RayJob head Service and the dashboard URL."""

from __future__ import annotations

import pytest

from raybus.api.raycluster import RayCluster
from raybus.decisions.cluster.settings import OperatorSettings
from raybus.decisions.job.cluster import build_head_service_for_rayjob, construct_ray_cluster, dashboard_url
from raybus.decisions.job.submitter import SubmitterError
from tests.unit.decisions.job.fixtures import make_cluster, make_job

S = OperatorSettings()


def test_cluster_carries_rayjob_labels_annotations_origin_and_owner() -> None:
    job = make_job(meta={"labels": {"team": "a"}, "annotations": {"note": "x"}})
    cluster = construct_ray_cluster(job, name="rj-abcde", job_id="rj-1", dashboard_url="", settings=S)
    meta = cluster["metadata"]
    assert meta["name"] == "rj-abcde" and meta["namespace"] == "ns"
    assert meta["labels"] == {"team": "a", "ray.io/originated-from-cr-name": "rj",
                              "ray.io/originated-from-crd": "RayJob", "ray.io/job-submission-mode": "K8sJobMode"}
    assert meta["annotations"] == {"note": "x"}
    assert meta["ownerReferences"][0]["kind"] == "RayJob" and meta["ownerReferences"][0]["controller"] is True
    assert cluster["spec"] == job.spec.ray_cluster_spec.to_dict()  # rayClusterSpec as is
    assert "restartPolicy" not in cluster["spec"]["headGroupSpec"]["template"]["spec"]


def test_sidecar_mode_injects_submitter_and_never_restarts_the_head() -> None:
    job = make_job(submissionMode="SidecarMode")
    cluster = construct_ray_cluster(job, name="rj-abcde", job_id="rj-1", dashboard_url="", settings=S)
    pod = cluster["spec"]["headGroupSpec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert [c["name"] for c in pod["containers"]] == ["ray-head", "ray-job-submitter"]
    sidecar = pod["containers"][1]
    assert sidecar["image"] == "rayproject/ray:2.52.0" and sidecar["command"] == ["/bin/bash", "-ce", "--"]
    assert "--submission-id rj-1" in sidecar["args"][0] and "http://127.0.0.1:8265" in sidecar["args"][0]
    assert {"name": "RAY_JOB_SUBMISSION_ID", "value": "rj-1"} in sidecar["env"]
    assert cluster["metadata"]["annotations"] == {"ray.io/disable-provisioned-head-restart": "true"}
    assert cluster["metadata"]["labels"]["ray.io/job-submission-mode"] == "SidecarMode"
    # the RayJob's own spec is untouched
    assert len(job.spec.ray_cluster_spec.head_group_spec.template["spec"]["containers"]) == 1


def test_dashboard_url_from_the_head_service() -> None:
    job = make_job()
    assert dashboard_url(make_cluster(job, "rj-abcde"), settings=S) == "rj-abcde-head-svc.ns.svc.cluster.local:8265"
    assert dashboard_url(make_cluster(job, "rj-abcde"), settings=OperatorSettings(cluster_domain="k8s.local")) \
        == "rj-abcde-head-svc.ns.svc.k8s.local:8265"


def test_dashboard_url_defaults_and_custom_service_ports() -> None:
    no_ports = RayCluster.model_validate({"metadata": {"name": "c", "namespace": "ns"}, "spec": {"headGroupSpec": {
        "template": {"spec": {"containers": [{"name": "ray-head", "image": "i"}]}}}}})
    assert dashboard_url(no_ports, settings=S).endswith(":8265")
    custom = RayCluster.model_validate({"metadata": {"name": "c", "namespace": "ns"}, "spec": {"headGroupSpec": {
        "headService": {"metadata": {"name": "mine"}, "spec": {"ports": [{"name": "dashboard", "port": 443}]}},
        "template": {"spec": {"containers": [{"name": "ray-head", "image": "i"}]}}}}})
    assert dashboard_url(custom, settings=S) == "mine.ns.svc.cluster.local:443"
    no_dash = RayCluster.model_validate({"metadata": {"name": "c", "namespace": "ns"}, "spec": {"headGroupSpec": {
        "template": {"spec": {"containers": [{"name": "ray-head", "image": "i",
                                              "ports": [{"name": "gcs-server", "containerPort": 6379}]}]}}}}})
    with pytest.raises(SubmitterError, match="dashboard port is not found"):
        dashboard_url(no_dash, settings=S)


def test_rayjob_head_service_selects_the_current_cluster() -> None:
    job = make_job()
    svc = build_head_service_for_rayjob(job, make_cluster(job, "rj-abcde"), settings=S)
    assert svc["metadata"]["name"] == "rj-head-svc"
    assert svc["metadata"]["labels"] == {"ray.io/originated-from-cr-name": "rj", "ray.io/originated-from-crd": "RayJob",
                                         "ray.io/node-type": "head", "ray.io/identifier": "rj-head"}
    assert svc["spec"]["selector"]["ray.io/cluster"] == "rj-abcde"
    assert [r["kind"] for r in svc["metadata"]["ownerReferences"]] == ["RayJob"]
