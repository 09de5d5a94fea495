"""The Kubernetes objects a RayJob creates and deletes (``getOrCreateRayClusterInstance``,
``reconcileServices``, ``createK8sJobIfNeed``, ``deleteClusterResources``, ``deleteSubmitterJob``,
``suspendWorkerGroups``). Each emits commands; the snapshot shows their effect next round
(read-your-writes), exactly where KubeRay's synchronous client call would have returned."""

from __future__ import annotations

from typing import Any

from raybus.api.raycluster import RayCluster
from raybus.api.rayjob import JobSubmissionMode
from raybus.decisions.cluster import podutil
from raybus.decisions.commands import CreateObject, DeleteObject, ObjectRef, PatchObject
from raybus.decisions.job import constants as c
from raybus.decisions.job.cluster import (
    build_head_service_for_rayjob,
    construct_ray_cluster,
    service_selects_cluster,
)
from raybus.decisions.job.submitter import SubmitterError, submitter_job, submitter_template
from raybus.decisions.job.work import Work


def cluster_name(w: Work) -> str:
    """common.RayJobRayClusterNamespacedName: status.rayClusterName."""
    return w.get("rayClusterName")


def uses_cluster_selector(w: Work) -> bool:
    return bool(w.job.spec.cluster_selector)


def _cluster_ref(cluster: RayCluster) -> ObjectRef:
    return ObjectRef(api_version="ray.io/v1", kind="RayCluster", namespace=cluster.namespace,
                     name=cluster.name, uid=cluster.metadata.uid)


def current_cluster(w: Work) -> RayCluster | None:
    """The snapshot's RayCluster if it is the one status.rayClusterName names."""
    cluster = w.snapshot.cluster
    return cluster if cluster is not None and cluster.name == cluster_name(w) else None


def get_or_create_cluster(w: Work) -> RayCluster | None:
    """getOrCreateRayClusterInstance. None (with w.error set) where KubeRay returns an error.

    A cluster created this round is returned as constructed (empty status, so not ready), which is
    what KubeRay's Create leaves in rayClusterInstance."""
    cluster = current_cluster(w)
    if cluster is not None:
        return cluster
    name = cluster_name(w)
    if uses_cluster_selector(w):
        # Never created (nor deleted) by us: the user must create it.
        w.event(c.RAY_CLUSTER_NOT_FOUND, f"RayCluster {w.job.namespace}/{name} set in the clusterSelector is not "
                "found. It must be created manually", warning=True)
        w.fail_reconcile(f"clusterSelector mode is enabled, but RayCluster {w.job.namespace}/{name} is not found")
        return None
    try:
        manifest = construct_ray_cluster(w.job, name=name, job_id=w.get("jobId"),
                                         dashboard_url=w.get("dashboardURL"), settings=w.settings.operator)
    except SubmitterError as exc:
        w.fail_reconcile(str(exc))
        return None
    w.commands.append(CreateObject(reason=f"Created RayCluster {w.job.namespace}/{name}", object=manifest,
                                   event_reason=c.CREATED_RAY_CLUSTER))
    w.log(f"RayCluster {name} not found: creating it")
    return RayCluster.model_validate(manifest)


def reconcile_services(w: Work, cluster: RayCluster) -> None:
    """reconcileServices: the RayJob's own head Service ``<rayjob>-head-svc``, pointed at the
    current cluster (its selector is updated when a retry switches clusters)."""
    if uses_cluster_selector(w):
        return
    wanted = build_head_service_for_rayjob(w.job, cluster, settings=w.settings.operator)
    name = wanted["metadata"]["name"]
    existing = w.snapshot.head_service
    where = f"{w.job.namespace}/{name}"
    if existing is None:
        w.commands.append(CreateObject(reason=f"Created the service {where}", object=wanted,
                                       event_reason=c.CREATED_SERVICE))
        return
    if service_selects_cluster(existing) == cluster.name:
        return
    # ClusterIP is immutable: keep the old one (KubeRay copies it for pre-1.21.5 API servers).
    spec: dict[str, Any] = dict(wanted["spec"])
    old_ip = (existing.get("spec") or {}).get("clusterIP")
    if old_ip:
        spec["clusterIP"] = old_ip
    meta = existing.get("metadata") or {}
    target = ObjectRef(api_version="v1", kind="Service", namespace=w.job.namespace, name=name, uid=meta.get("uid"))
    w.commands.append(PatchObject(reason=f"Updated the service {where}", target=target,
                                  merge_patch={"spec": spec}, event_reason=c.UPDATED_SERVICE))


def create_submitter_if_needed(w: Work, cluster: RayCluster) -> bool:
    """createK8sJobIfNeed. False (with w.error) where KubeRay returns an error."""
    if w.snapshot.submitter is not None:
        w.log(f"The submitter Kubernetes Job {w.job.name} already exists")
        return True
    spec = cluster.spec
    try:
        template = submitter_template(w.job, job_id=w.get("jobId"), dashboard_url=w.get("dashboardURL"),
                                      cluster_name=cluster.name, cluster_spec=spec, settings=w.settings.operator)
    except SubmitterError as exc:
        w.fail_reconcile(str(exc))
        return False
    manifest = submitter_job(w.job, template)
    w.commands.append(CreateObject(reason=f"Created Kubernetes Job {w.job.namespace}/{w.job.name}",
                                   object=manifest, event_reason=c.CREATED_RAY_JOB_SUBMITTER))
    return True


def delete_cluster_resources(w: Work) -> bool:
    """deleteClusterResources -> isClusterDeleted. A selected (clusterSelector) cluster is never ours
    to delete: it counts as released."""
    if uses_cluster_selector(w):
        return True
    cluster = current_cluster(w)
    if cluster is None:
        return True
    if cluster.metadata.deletion_timestamp:
        w.log(f"The deletion of the RayCluster {cluster.name} is ongoing")
        return False
    where = f"{cluster.namespace}/{cluster.name}"
    w.commands.append(DeleteObject(reason=f"Deleted cluster {where}", target=_cluster_ref(cluster),
                                   event_reason=c.DELETED_RAY_CLUSTER))
    return False


def delete_submitter_job(w: Work) -> bool:
    """deleteSubmitterJob -> isJobDeleted. HTTPMode and SidecarMode have no submitter Job. A new
    submitter (same name) must be created on resume/retry, so the old one has to be gone first."""
    if w.mode in (JobSubmissionMode.HTTP, JobSubmissionMode.SIDECAR):
        return True
    job = w.snapshot.submitter
    if job is None:
        return True
    if podutil.is_terminating(job):
        w.log("The deletion of the submitter Kubernetes Job is ongoing")
        return False
    target = ObjectRef.of(job, api_version="batch/v1", kind="Job", namespace=w.job.namespace)
    w.commands.append(DeleteObject(reason=f"Deleted submitter K8s Job {w.job.namespace}/{podutil.name(job)}",
                                   target=target, propagation="Background", event_reason=c.DELETED_RAY_JOB_SUBMITTER))
    return False


def delete_cluster(w: Work) -> None:
    """executeDeletionPolicy(DeleteCluster) / shutdownAfterJobFinishes: only the RayCluster; the
    finished submitter Job stays so users can still read the driver logs."""
    delete_cluster_resources(w)


def suspend_worker_groups(w: Work) -> None:
    """suspendWorkerGroups (DeleteWorkers): every worker group's ``suspend`` set to true. KubeRay
    Updates the cluster; a merge patch must replace the whole list, so it carries the snapshot's
    resourceVersion as a precondition (a concurrent change -> 409 -> decided again)."""
    cluster = current_cluster(w)
    if cluster is None:
        w.fail_reconcile(f"RayCluster {w.job.namespace}/{cluster_name(w)} not found")
        return
    groups = [g.to_dict() for g in cluster.spec.worker_group_specs or []]
    for group in groups:
        group["suspend"] = True
    patch: dict[str, Any] = {"spec": {"workerGroupSpecs": groups}}
    if cluster.metadata.resource_version:
        patch["metadata"] = {"resourceVersion": cluster.metadata.resource_version}
    where = f"{cluster.namespace}/{cluster.name}"
    w.commands.append(PatchObject(reason=f"Set the `suspend` field to true for all worker groups in cluster {where}",
                                  target=_cluster_ref(cluster), merge_patch=patch, event_reason=c.UPDATED_RAY_CLUSTER))


def delete_self(w: Work) -> None:
    """DeleteSelf / DELETE_RAYJOB_CR_AFTER_JOB_FINISHES: delete the RayJob (its owned objects follow)."""
    w.commands.append(DeleteObject(reason=f"Deleted RayJob {w.job.namespace}/{w.job.name}",
                                   target=ObjectRef(api_version="ray.io/v1", kind="RayJob", namespace=w.job.namespace,
                                                    name=w.job.name, uid=w.job.metadata.uid)))
